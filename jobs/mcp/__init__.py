"""The MCP endpoint: agentsite's tools for any MCP client, long calls as tasks.

Built on the official ``mcp`` SDK (lowlevel ``Server`` + Streamable HTTP session
manager). Async tools run as jobs and are seen as MCP tasks; the job row is the
task, so every web process can answer for every task.

- ``mapping``: job → task and tool-result documents (pure, sync).
- ``calls``: the sync service calls the handlers make (jobs services, owner checks).
- ``watch``: waiting for job changes (channel-layer wake-ups, the database as truth).
- ``server``: the MCP request handlers for both task vocabularies.
- ``endpoint``: the ASGI app mounted at ``/mcp`` (Bearer auth, session manager).
"""
