"""The MCP endpoint: agentsite's tools for any MCP client, long calls as tasks.

Built on the official ``mcp`` SDK (lowlevel ``Server`` + Streamable HTTP session
manager). Async tools run as jobs and are seen as MCP tasks; the job row is the
task, so every web process can answer for every task.

- ``mapping``: job → task and tool-result documents (pure, sync).
- ``calls``: the sync service calls the handlers make (jobs services, owner checks).
- ``watch``: waiting for job changes (channel-layer wake-ups, the database as truth).
- ``request_context``: what every handler reads of its request (owner, protocol version).
- ``current_spec``: the 2026-07-28 handlers (the tasks extension).
- ``previous_spec``: the 2025-11-25 handlers (core tasks, status pushed on the session).
- ``server``: the lowlevel ``Server``: the tool list, blocking calls, each task method
  routed to its protocol version's handler.
- ``endpoint``: the ASGI app mounted at ``/mcp`` (Bearer auth, session manager).
"""
