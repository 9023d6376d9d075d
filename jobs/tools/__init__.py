"""Built-in tools. Importing this package registers them."""
