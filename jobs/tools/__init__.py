"""Built-in tools, one module each; ``jobs.registry.BUILTIN_TOOL_MODULES`` lists them."""
