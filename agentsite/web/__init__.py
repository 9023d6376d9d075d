"""The edge toolkit every HTTP and websocket edge shares: authentication, request and
error bodies, error pages, middleware, the websocket origin check, and frames written
straight to daphne's sockets."""
