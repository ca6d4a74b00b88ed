"""A gate window's evidence from Prometheus instead of the ledger: the gateway's own series (evidence/
gateway_series.py) queried through rollout/prometheus.py, turned into the same WindowStats the ledger gives."""

from __future__ import annotations

from switchover.config.rollout import PrometheusSource
from switchover.evidence import gateway_series as mn
from switchover.rollout.custom_gates import promql_vector
from switchover.rollout.gates import ArmWindow, WindowStats


def promql(source: PrometheusSource, query: str) -> float | None:
    """One instant query; the value of its first series, None when empty or NaN (custom_gates.promql_vector)."""
    series = promql_vector(source, query)
    return series[0][1] if series else None


def stats_from_prometheus(source: PrometheusSource, *, window_s: float) -> WindowStats:
    """The same evidence from the gateway's metrics (shadow distributions need the ledger)."""
    w = f"{int(window_s)}s"
    sel = source.selector

    def q(expr: str) -> float | None:
        return promql(source, expr)

    def n(expr: str) -> int:
        v = q(expr)
        return round(v) if v is not None else 0  # a labelled counter has no series until its first increment

    requests_expr = mn.new_requests(w, sel)
    requests = q(requests_expr)
    new = ArmWindow(
        requests=round(requests) if requests is not None else 0,
        errors=n(mn.new_errors(w, sel)),
        fallbacks=n(mn.fallbacks(w, sel)),
    )
    warnings = []
    if requests is None:
        warnings.append(
            f"Prometheus has no series for new's requests ({requests_expr}): nothing was measured, not zero traffic "
            "for certain; check rollout.prometheus.selector and that Prometheus scrapes the gateway's /metrics"
        )
    old = ArmWindow()
    for name, arm in (("old", old), ("new", new)):
        for hist, attr in ((mn.TTFT, "ttft"), (mn.TPOT, "tpot")):
            count = n(mn.count(hist, name, w, sel))
            p99 = q(mn.quantile(hist, 0.99, name, w, sel)) if count else None
            setattr(arm, f"{attr}_n", count)
            setattr(arm, f"{attr}_p99_ms", p99 * 1000 if p99 is not None else None)
    return WindowStats(
        source="prometheus",
        window_s=window_s,
        old=old,
        new=new,
        notes=[
            "histogram_quantile interpolates within buckets: p99 is as fine as the buckets",
            "shadow distribution tests need per-request rows: use the ledger source",
        ],
        warnings=warnings,
    )
