"""Microsoft Agent Framework against /v1: background runs polled, a resumed stream, and a
function tool of its own called by the model.

Run by tests/responses/test_agent_framework.py in a virtual environment of its
own (``python maf_client.py BASE_URL API_TOKEN`` or ``… BASE_URL API_TOKEN tools
PREVIOUS_RESPONSE_ID``); prints what it saw as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated

from agent_framework_openai import OpenAIChatClient

CALLS: list[str] = []


def get_weather(city: Annotated[str, "The city"]) -> str:
    """The weather in a city."""
    CALLS.append(city)
    return f"sunny in {city}"


async def function_tool(base_url: str, token: str, previous_response_id: str) -> None:
    """The model calls get_weather; MAF runs it and sends its output back, then the model
    answers. The session the model is scripted for is the previous response's."""
    client = OpenAIChatClient(model="scripted", api_key=token, base_url=base_url)
    agent = client.as_agent(name="agentsite", tools=[get_weather])
    response = await agent.run(
        "What is the weather in Paris?", options={"conversation_id": previous_response_id}
    )
    print(json.dumps({"calls": CALLS, "text": response.text}))


async def main(base_url: str, token: str) -> None:
    client = OpenAIChatClient(model="offline", api_key=token, base_url=base_url)
    agent = client.as_agent(name="agentsite")
    seen: dict[str, object] = {}

    # Background: start, then poll with the continuation token until it is None.
    session = agent.create_session()
    response = await agent.run("run the tests", session=session, options={"background": True})
    seen["first_token"] = response.continuation_token is not None
    polls = 0
    while response.continuation_token is not None:
        await asyncio.sleep(0.3)
        response = await agent.run(
            session=session, options={"continuation_token": response.continuation_token}
        )
        polls += 1
    seen["polls"] = polls
    seen["background_text"] = response.text

    # Streaming: cut after the first text, resume with the last continuation token.
    token_seen = None
    before = []
    async for update in agent.run("run the tests", stream=True, options={"background": True}):
        if update.continuation_token is not None:
            token_seen = update.continuation_token
        if update.text:
            before.append(update.text)
            break
    after = []
    async for update in agent.run(stream=True, options={"continuation_token": token_seen}):
        if update.text:
            after.append(update.text)
    seen["stream_before"] = before
    seen["stream_after"] = after
    print(json.dumps(seen))


if __name__ == "__main__":
    if sys.argv[3:4] == ["tools"]:
        asyncio.run(function_tool(sys.argv[1], sys.argv[2], sys.argv[4]))
    else:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
