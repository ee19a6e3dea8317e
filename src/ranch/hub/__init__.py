"""The running service: the only place the parts are wired together."""
