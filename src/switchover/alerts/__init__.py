"""Alert rules across engines: translate Prometheus rules from one engine's metrics to another's."""
