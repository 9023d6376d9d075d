"""The tools a model is offered, in the Messages API shape.

Blocking tools are offered under their own names. Each async tool is offered as
``start_<tool>``, which starts a job and returns at once; ``get_job_status``,
``stop_job`` and ``get_job_result`` work on those jobs; ``ask_user`` asks the
user a question whose answer comes later. ``sessions.toolbox`` carries the
calls out.
"""

from __future__ import annotations

from typing import Any

from jobs.registry import Tool, all_tools

START_PREFIX = "start_"
RESULT_PAGE_SIZE = 20

START_NOTE = (
    "Starts `{name}` as a background job and returns immediately with "
    '{{"job_id", "status": "queued"}}. The result arrives later as a job_completed event '
    "in the conversation. Do not wait for it and do not poll in a loop: carry on with the "
    "conversation; use get_job_status, stop_job or get_job_result when asked."
)

JOB_ID_SCHEMA = {"type": "string", "description": "The job id, e.g. job_8f2c…"}

# Every ``start_<tool>`` takes this beside the tool's own arguments: the job
# waits until these jobs are done (and fails if one of them does not succeed).
DEPENDS_ON = "depends_on"
DEPENDS_ON_SCHEMA = {
    "type": "array",
    "items": JOB_ID_SCHEMA,
    "description": (
        "Jobs started earlier in this session that this job waits for: it starts once they "
        "are all done, and fails if one of them fails."
    ),
}

ASK_USER = "ask_user"
ASK_USER_TOOL: dict[str, Any] = {
    "name": ASK_USER,
    "description": (
        "Ask the user a question and go on without waiting: returns at once with "
        '{"request_id", "status": "awaiting_answer"}; the answer arrives later as an event '
        "in the conversation (or their refusal, or the question's expiry). Give answer_schema "
        "(a JSON schema) for a structured answer; without it the answer is text."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "What to ask, in one or two sentences."},
            "answer_schema": {
                "type": "object",
                "description": "The JSON schema the answer must meet; default: a string.",
            },
        },
        "required": ["question"],
    },
}

SHARED_TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_job_status",
        "description": "The current status and progress of a job started in this session.",
        "input_schema": {
            "type": "object",
            "properties": {"job_id": JOB_ID_SCHEMA},
            "required": ["job_id"],
        },
    },
    {
        "name": "stop_job",
        "description": (
            "Ask a job to stop. Returns the state actually reached: 'cancelling' while it "
            "winds down, or its final status if it had already finished."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"job_id": JOB_ID_SCHEMA},
            "required": ["job_id"],
        },
    },
    {
        "name": "get_job_result",
        "description": (
            "The result of a finished job; with a cursor (or while the job still runs), "
            "a page of its partial results from that cursor on."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "job_id": JOB_ID_SCHEMA,
                "cursor": {"type": "integer", "minimum": 0},
            },
            "required": ["job_id"],
        },
    },
]


def tool_definitions() -> list[dict[str, Any]]:
    """Every tool the model is offered, in the Messages API shape."""
    defs: list[dict[str, Any]] = []
    for spec in all_tools():
        if spec.kind == "async":
            defs.append(
                {
                    "name": f"{START_PREFIX}{spec.name}",
                    "description": f"{spec.description}\n\n{START_NOTE.format(name=spec.name)}",
                    "input_schema": start_schema(spec),
                }
            )
        else:
            defs.append(
                {
                    "name": spec.name,
                    "description": spec.description,
                    "input_schema": spec.input_schema(),
                }
            )
    return [*defs, *SHARED_TOOLS, ASK_USER_TOOL]


def start_schema(spec: Tool) -> dict[str, Any]:
    """The tool's input schema with ``depends_on`` beside its own arguments."""
    schema = spec.input_schema()
    schema.setdefault("properties", {})[DEPENDS_ON] = DEPENDS_ON_SCHEMA
    return schema
