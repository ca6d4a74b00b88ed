"""The PromQL names the gates and exports use exist in what the gateway exports."""

from __future__ import annotations

from switchover.evidence import gateway_series as mn
from switchover.gateway.metrics import GatewayMetrics


def test_every_queried_series_is_exported_by_the_gateway() -> None:
    m = GatewayMetrics()
    m.requests.labels(arm="new", outcome="ok").inc()
    m.routed.labels(arm="new", reason="weight").inc()
    m.fallbacks.labels(reason="status").inc()
    m.shadow.labels(result="ok").inc()
    for h in (m.ttft, m.tpot, m.e2e):
        h.labels(arm="new").observe(0.1)
    text = m.render().decode()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    missing = [n for n in mn.ALL if n not in names]
    assert not missing, f"gateway no longer exports {missing}"
