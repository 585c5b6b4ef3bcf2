"""The HTTP server: the remote-backend protocol, read endpoints, auth."""
