"""agentsite.compat.daphne: what it relies on in daphne is still there."""

from __future__ import annotations

import ast

import daphne.http_protocol
import daphne.ws_protocol
from autobahn.twisted.websocket import WebSocketServerProtocol
from twisted.web import http

from tests.compat.internals import assigned_attributes, method, module_tree, parameters


def test_daphne_hands_the_application_a_partial_of_handle_reply_over_the_protocol() -> None:
    create = method(module_tree("daphne.server"), "Server", "create_application")
    sends = [
        keyword.value
        for node in ast.walk(create)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "send"
    ]
    assert [ast.unparse(value) for value in sends] == ["partial(self.handle_reply, protocol)"]
    handle_reply = method(module_tree("daphne.server"), "Server", "handle_reply")
    assert [a.arg for a in handle_reply.args.args][:2] == ["self", "protocol"]


def test_daphne_protocols_are_twisteds_request_and_autobahns_protocol() -> None:
    assert issubclass(daphne.http_protocol.WebRequest, http.Request)
    assert issubclass(daphne.ws_protocol.WebSocketProtocol, WebSocketServerProtocol)


def test_the_request_body_hooks_the_body_limit_wraps_keep_their_signatures() -> None:
    """Read from the sources: the running process may have patched the class already."""
    daphne_source = module_tree("daphne.http_protocol")
    expected = {"gotLength": ["self", "length"], "handleContentChunk": ["self", "data"]}
    for name, arguments in expected.items():
        try:
            own = method(daphne_source, "WebRequest", name)
        except AssertionError:  # inherited from Twisted's Request
            assert parameters(getattr(http.Request, name)) == arguments
        else:
            assert [a.arg for a in own.args.args] == arguments
    assert [a.arg for a in method(daphne_source, "WebRequest", "process").args.args] == ["self"]
    assert {"channel", "content"} <= assigned_attributes(daphne.http_protocol.WebRequest)
    assert {"_path", "transport"} <= assigned_attributes(http.HTTPChannel)


def test_twisteds_request_parses_forms_only_when_its_flag_says_so() -> None:
    """The flag ``limit_request_bodies`` turns off: the constructor's parameter, kept on the
    request and read where the body is complete; daphne's request never reads ``args``."""
    assert "parsePOSTFormSubmission" in parameters(http.Request.__init__)
    assert "_parsePOSTFormSubmission" in assigned_attributes(http.Request)
    received = ast.unparse(method(module_tree("twisted.web.http"), "Request", "requestReceived"))
    assert "self._parsePOSTFormSubmission" in received
    assert ".args" not in ast.unparse(module_tree("daphne.http_protocol"))


def test_a_body_with_more_to_come_is_twisteds_request_write_unless_the_request_finished() -> None:
    """``write_body`` does what ``WebRequest.handle_reply`` does with such a message."""
    assert "write" not in vars(daphne.http_protocol.WebRequest)  # Twisted's own write
    handle_reply = ast.unparse(
        method(module_tree("daphne.http_protocol"), "WebRequest", "handle_reply")
    )
    assert "http.Request.write(self, message.get('body', b''))" in handle_reply
    assert "if self.finished or self.channel is None:" in handle_reply
    assert parameters(http.Request.write) == ["self", "data"]
    assert "finished" in assigned_attributes(http.Request)


def test_a_chunked_write_past_the_headers_counts_the_length_and_writes_to_chunk() -> None:
    """``write_body``'s ``write_chunk`` takes what Twisted's ``Request.write`` hands its
    channel once the headers are out, framed as ``toChunk`` frames it."""
    write = ast.unparse(method(module_tree("twisted.web.http"), "Request", "write"))
    assert "self.sentLength = self.sentLength + len(data)" in write
    assert "self.channel.writeSequence(toChunk(data))" in write
    assert "self.write = lambda data: None" in write  # HEAD and bodiless statuses
    assert b"".join(http.toChunk(b"event")) == b"5\r\nevent\r\n"
    assert {"startedWriting", "chunked", "sentLength"} <= assigned_attributes(http.Request)
    assert "writeSequence" in vars(http.HTTPChannel)
