from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from django.test import Client

from jobs import api
from tests.jobs.factories import started_job_id

pytestmark = pytest.mark.django_db


def test_jobs_are_listed_newest_first_in_pages(api_client: Any) -> None:
    ids = [started_job_id(api_client, "sleepy", {"seconds": i}) for i in range(5)]

    first = api_client.get("/api/jobs?limit=2").json()
    rest = api_client.get("/api/jobs?limit=10&offset=2").json()

    assert (first["count"], first["count_exact"]) == (5, True)
    assert [j["job_id"] for j in first["items"] + rest["items"]] == ids[::-1]


def test_jobs_are_filtered_by_status_and_tool(api_client: Any) -> None:
    sleeping = started_job_id(api_client, "sleepy")
    cancelled = started_job_id(api_client, "noop")
    api_client.delete(f"/api/jobs/{cancelled}")

    by_status = api_client.get("/api/jobs?status=cancelled").json()["items"]
    by_tool = api_client.get("/api/jobs?tool=sleepy").json()["items"]

    assert [j["job_id"] for j in by_status] == [cancelled]
    assert [j["job_id"] for j in by_tool] == [sleeping]
    assert by_status[0]["error"] == {"code": "cancelled", "message": "Cancelled before it started."}


def test_the_count_reads_no_further_than_a_bound_past_the_page(
    api_client: Any, other_api_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: count was an exact COUNT over every job of the owner, and no
    # count_exact said whether it was.
    monkeypatch.setattr(api, "COUNT_AHEAD", 3)
    ids = [started_job_id(api_client, "sleepy") for _ in range(6)]
    ids.append(started_job_id(api_client, "noop"))
    started_job_id(other_api_client, "sleepy")

    def listed(query: str) -> tuple[int, bool, list[str]]:
        response = api_client.get(f"/api/jobs?{query}")
        assert response.status_code == 200, response.content
        body = response.json()
        return body["count"], body["count_exact"], [j["job_id"] for j in body["items"]]

    # 7 jobs; the page ends at 2 and the count at 2 + 3: a lower bound.
    assert listed("limit=2") == (5, False, ids[:-3:-1])
    # The page ends at 4, the count could reach 7: all 7 are counted.
    assert listed("limit=2&offset=2")[:2] == (7, True)
    assert listed("limit=3&offset=1")[:2] == (7, True)
    # The filters bound the count the same way.
    assert listed("tool=sleepy&limit=1") == (4, False, [ids[-2]])
    assert listed("tool=sleepy&limit=3")[:2] == (6, True)
    assert listed("tool=noop&limit=1")[:2] == (1, True)
    # Past the last job: no items, and the count is still exact.
    assert listed("offset=50") == (7, True, [])


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "offset=-1", "limit=x"])
def test_a_page_out_of_range_is_refused_in_the_error_format(api_client: Any, query: str) -> None:
    response = api_client.get(f"/api/jobs?{query}")
    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "invalid_request"


def test_the_document_describes_the_page_and_its_bounded_count(
    api_client: Any, client: Client
) -> None:
    started_job_id(api_client, "sleepy")
    doc = client.get("/api/openapi.json").json()
    page = doc["components"]["schemas"]["JobPage"]
    assert {"items", "count", "count_exact", "limit", "offset"} <= set(page["required"])
    assert page["properties"]["count_exact"]["type"] == "boolean"
    assert "lower bound" in page["properties"]["count"]["description"]
    validator = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/JobPage", "components": doc["components"]}
    )
    validator.validate(api_client.get("/api/jobs").json())
