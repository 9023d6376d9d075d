"""A run belongs to a response when its batch holds one of the response's triggers.

Here a browser conversation goes on in the same session while the response's
job runs: the turn that only answers the browser is not the response's; the
turn that takes the job's completion is, together with the browser message it
took in the same batch.
"""

from __future__ import annotations

import pytest
from openai import OpenAI

from jobs.models import Job
from responses.models import AgentResponse
from sessions.llm.scripted import scripted_open, scripted_push
from sessions.models import Event, Run
from sessions.services import message_post
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_only_turns_that_take_the_responses_triggers_are_in_it(client: OpenAI) -> None:
    first = client.responses.create(model="scripted", input="hello")
    record = AgentResponse.objects.select_related("session").get(pk=first.id)
    session = record.session
    scripted_push(
        session.id,
        {
            "text": "Starting the job. ",
            "tool_calls": [{"name": "start_sleepy", "input": {"seconds": 3, "steps": 3}}],
        },
        {"text": "It runs."},
        {"text": "Busy with the browser.", "gate": "browser"},
        {"text": "The job is done, and hello to the browser too."},
    )
    response = client.responses.create(
        model="scripted", input="sleep", previous_response_id=first.id, background=True
    )
    job = wait_until(lambda: Job.objects.filter(session=session, tool="sleepy").first())
    own_run = job.run_id
    wait_until(lambda: Run.objects.get(pk=own_run).is_terminal)

    # The browser speaks while the job runs: that turn waits on its gate past the job's end.
    _, browser_run = message_post(session=session, text="from the browser")
    wait_until(lambda: Job.objects.get(pk=job.pk).is_terminal, timeout=30)
    assert client.responses.retrieve(response.id).status == "in_progress"
    message_post(session=session, text="and again")
    scripted_open(session.id, "browser")

    def ended() -> object:
        found = client.responses.retrieve(response.id)
        return found if found.status != "in_progress" else None

    done = wait_until(ended, timeout=30)
    assert done.status == "completed"
    assert (
        done.output_text
        == "Starting the job. It runs.The job is done, and hello to the browser too."
    )
    assert "Busy with the browser." not in done.output_text
    # The turn that took the job's completion also took the second browser message.
    reporting = Event.objects.get(
        session=session, kind="job_event", pending=False, payload__status="done"
    ).consumed_by
    assert reporting is not None and reporting.pk != browser_run.pk
    assert Event.objects.filter(consumed_by=reporting, kind="user_message").count() == 1
