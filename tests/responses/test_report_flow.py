"""The offline model's report flow through the Responses API, in background mode.

Each response lasts as long as the job it started, so coming back later finds
the whole story in its output: the test results, then the report written from
them in the same session (``previous_response_id``).
"""

from __future__ import annotations

import pytest
from openai import OpenAI

from responses.models import AgentResponse
from tests.responses.test_background import retrieve_until_ended

pytestmark = pytest.mark.django_db(transaction=True)


def test_tests_then_a_report_on_the_failures(client: OpenAI) -> None:
    tests = client.responses.create(model="offline", input="run the tests", background=True)
    tests = retrieve_until_ended(client, tests.id)
    assert tests.status == "completed"
    assert "The tests finished: 31 passed, 2 failed" in tests.output_text

    report = client.responses.create(
        model="offline",
        input="write a report on the failures",
        previous_response_id=tests.id,
        background=True,
    )
    report = retrieve_until_ended(client, report.id)
    assert report.status == "completed"
    assert report.previous_response_id == tests.id
    assert "from 1 earlier job(s)" in report.output_text
    assert "The report is ready:" in report.output_text
    call = next(item for item in report.output if item.type == "mcp_call")
    assert call.name == "start_write_report" and call.status == "completed"
    # Nothing of the first response's turns is in the second one's output.
    assert "The tests finished" not in report.output_text

    sessions = AgentResponse.objects.filter(pk__in=[tests.id, report.id])
    assert len({r.session_id for r in sessions}) == 1
