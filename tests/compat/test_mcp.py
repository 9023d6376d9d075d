"""agentsite.compat.mcp: the session manager's private steps it hooks are still there.

What the hooks do end to end: tests/mcp/test_session_quota.py.
"""

from __future__ import annotations

import ast

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from tests.compat.internals import assigned_attributes, method, module_tree, parameters

MODULE = "mcp.server.streamable_http_manager"
MANAGER = "StreamableHTTPSessionManager"


def test_the_private_steps_keep_their_signatures() -> None:
    manager = StreamableHTTPSessionManager
    assert parameters(manager._handle_stateful_request) == ["self", "scope", "receive", "send"]
    assert parameters(manager._admit_session) == ["self", "requestor"]
    assert parameters(manager._discard_session) == ["self", "session_id", "transport"]
    assert "_session_owners" in assigned_attributes(manager)


def calls_of(function: ast.AST) -> set[str]:
    return {ast.unparse(node.func) for node in ast.walk(function) if isinstance(node, ast.Call)}


def test_a_new_session_is_admitted_under_the_creation_lock_without_an_await() -> None:
    handle = method(module_tree(MODULE), MANAGER, "_handle_stateful_request")
    locked = [
        node
        for node in ast.walk(handle)
        if isinstance(node, ast.AsyncWith | ast.With)
        and any("_session_creation_lock" in ast.unparse(item) for item in node.items)
    ]
    assert locked, "no creation lock in _handle_stateful_request"
    admitting = [
        statement
        for block in locked
        for statement in ast.walk(block)
        if isinstance(statement, ast.Assign) and "self._admit_session" in calls_of(statement)
    ]
    assert admitting, "_admit_session is no longer called under the creation lock"
    assert not any(isinstance(node, ast.Await) for node in ast.walk(admitting[0]))


def test_sessions_are_ended_through_discard_session() -> None:
    tree = module_tree(MODULE)
    callers = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and "self._discard_session" in calls_of(node)
    ]
    assert callers, "nothing calls _discard_session any more"
