"""The graph bench/peers.py serves from the LangGraph Agent Server: agentsite's offline chat.

It runs in the peer's own virtualenv (``.bench/peers-venv``), not agentsite's: one node
calls a chat model that streams a fixed reply, the same pieces agentsite's offline model
streams for the benchmark's messages, with the same latency — ``call_s`` before the first
piece, then ``token_s`` per token before each piece (``sessions/llm/offline.py``). The
reply and the latency come from the JSON file named by ``PEER_CHAT_REPLY``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, MessagesState, StateGraph

with open(os.environ["PEER_CHAT_REPLY"]) as f:
    REPLY = json.load(f)
CALL_S: float = REPLY["call_s"]
TOKEN_S: float = REPLY["token_s"]
PIECES: list[tuple[str, int]] = [(text, tokens) for text, tokens in REPLY["pieces"]]


class OfflineChat(BaseChatModel):
    """A chat model that answers every message with the same reply, at a model's pace."""

    @property
    def _llm_type(self) -> str:
        return "agentsite-offline"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> Any:
        raise NotImplementedError("the graph calls the model asynchronously")

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        await asyncio.sleep(CALL_S)
        for text, tokens in PIECES:
            if TOKEN_S > 0:
                await asyncio.sleep(tokens * TOKEN_S)
            yield ChatGenerationChunk(message=AIMessageChunk(content=text))

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        text = "".join([chunk.message.content async for chunk in self._astream(messages)])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


model = OfflineChat()


async def chat(state: MessagesState) -> dict[str, list[BaseMessage]]:
    return {"messages": [await model.ainvoke(state["messages"])]}


graph = (
    StateGraph(MessagesState)
    .add_node("chat", chat)
    .add_edge(START, "chat")
    .add_edge("chat", END)
    .compile()
)
