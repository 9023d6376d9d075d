"""Microsoft Agent Framework against /v1: background runs polled, and a resumed stream.

Run by tests/responses/test_agent_framework.py in a virtual environment of its
own (``python maf_client.py BASE_URL API_TOKEN``); prints what it saw as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys

from agent_framework_openai import OpenAIChatClient


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
    asyncio.run(main(sys.argv[1], sys.argv[2]))
