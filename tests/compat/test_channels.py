"""agentsite.compat.channels: Channels' consumer as the fence runs it."""

from __future__ import annotations

import ast
from typing import Any

from asgiref.testing import ApplicationCommunicator
from channels.consumer import AsyncConsumer
from channels.exceptions import StopConsumer

from agentsite.compat import channels
from tests.compat.internals import method, module_tree, parameters


def test_the_consumer_loop_sets_what_the_fence_sets() -> None:
    call = method(module_tree("channels.consumer"), "AsyncConsumer", "__call__")
    assigned = {
        ast.unparse(target)
        for node in ast.walk(call)
        if isinstance(node, ast.Assign)
        for target in node.targets
    }
    assert {"self.scope", "self.channel_layer", "self.base_send"} <= assigned
    send = method(module_tree("channels.consumer"), "AsyncConsumer", "send")
    assert "await self.base_send(message)" in ast.unparse(send)
    assert parameters(AsyncConsumer.dispatch) == ["self", "message"]


class Echo(AsyncConsumer):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await channels.serve_without_layer(self, scope, receive, send)

    async def echo_say(self, message: dict[str, Any]) -> None:
        await self.send({"type": "echo.said", "text": message["text"], "path": self.scope["path"]})

    async def echo_stop(self, message: dict[str, Any]) -> None:
        raise StopConsumer


async def test_messages_are_dispatched_in_turn_until_a_handler_stops() -> None:
    communicator = ApplicationCommunicator(Echo.as_asgi(), {"type": "echo", "path": "/e"})
    for text in ("one", "two"):
        await communicator.send_input({"type": "echo.say", "text": text})
    assert await communicator.receive_output() == {"type": "echo.said", "text": "one", "path": "/e"}
    assert await communicator.receive_output() == {"type": "echo.said", "text": "two", "path": "/e"}
    await communicator.send_input({"type": "echo.stop"})
    await communicator.wait()  # returned: StopConsumer ended the loop cleanly
