"""What every layer may use: ids, query helpers, database-outage handling, log
context, telemetry counters, periodic-task and domain-error types.

Nothing here imports an app (``jobs``, ``sessions``) or an HTTP module.
"""
