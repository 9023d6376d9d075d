"""Operating a deployment: ``/healthz``, ``/metrics`` and the system checks of the settings."""
