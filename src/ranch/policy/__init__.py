"""Checks at the edges: input limits, rate limits, logs, outbound URLs, push notifications, deprecations."""
