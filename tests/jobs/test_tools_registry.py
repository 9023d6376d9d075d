"""The built-in tools are registered with schemas written for a model to read."""

from __future__ import annotations

from jobs.registry import all_tools, get_tool

KINDS = {
    "run_tests": "async",
    "crawl_site": "async",
    "write_report": "async",
    "read_file": "blocking",
    "list_files": "blocking",
    "http_get": "blocking",
    "now": "blocking",
}


def test_every_built_in_tool_is_registered_with_its_kind() -> None:
    registered = {tool.name: tool.kind for tool in all_tools()}

    assert {name: registered.get(name) for name in KINDS} == KINDS


def test_every_input_field_is_described_for_the_model() -> None:
    for name in KINDS:
        tool = get_tool(name)
        assert tool is not None
        schema = tool.input_schema()
        assert schema["type"] == "object"
        assert schema.get("additionalProperties") is False, name
        for field, spec in schema["properties"].items():
            assert spec.get("description"), f"{name}.{field} has no description"
        assert len(tool.description) > 40
        assert tool.default_timeout_s <= tool.max_timeout_s
