"""Observability: OpenTelemetry traces and Prometheus metrics (docs/observability.md)."""
