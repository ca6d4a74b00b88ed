"""The measuring vocabulary every verb shares: latency formulas (timing), the one percentile (percentiles) and the
Prometheus text parser (prometheus). A foundation package: it imports no verb (docs/architecture.md)."""
