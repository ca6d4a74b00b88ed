"""The gateway's Prometheus series as the gates, the Argo export and the Grafana export query them.

One place for the names: they mirror src/switchover/gateway/metrics.py (prometheus_client appends `_total`
to counters and `_bucket` / `_count` / `_sum` to histograms); tests/rollout/test_metric_names.py fails if
the gateway renames one.
"""

from __future__ import annotations

PREFIX = "switchover_gateway_"
REQUESTS = PREFIX + "requests_total"  # labels: arm (that answered), outcome
ROUTED = PREFIX + "routed_total"  # labels: arm (chosen by the policy), reason
FALLBACKS = PREFIX + "fallbacks_total"  # labels: reason
NEW_ARM_FAILURES = PREFIX + "new_arm_failures_total"
KILL_SWITCH_LATCHED = PREFIX + "kill_switch_latched"
WEIGHT = PREFIX + "weight_percent"
EFFECTIVE_WEIGHT = PREFIX + "effective_weight_percent"
IN_FLIGHT = PREFIX + "in_flight"
TTFT = PREFIX + "ttft_seconds"  # histogram, label arm
TPOT = PREFIX + "tpot_seconds"  # histogram, label arm
E2E = PREFIX + "e2e_seconds"  # histogram, label arm
SHADOW = PREFIX + "shadow_total"  # labels: result (ok, error, dropped)
ERROR_OUTCOMES = "error|failed_mid_stream"

ALL = (
    REQUESTS,
    ROUTED,
    FALLBACKS,
    NEW_ARM_FAILURES,
    KILL_SWITCH_LATCHED,
    WEIGHT,
    EFFECTIVE_WEIGHT,
    IN_FLIGHT,
    TTFT + "_bucket",
    TPOT + "_bucket",
    E2E + "_bucket",
    SHADOW,
)


def _sel(selector: str, *matchers: str) -> str:
    parts = [m for m in (*matchers, selector.strip().strip("{}")) if m]
    return "{" + ",".join(parts) + "}"


def _arm(arm: str) -> str:
    return f'arm="{arm}"'


def new_requests(window: str, selector: str = "") -> str:
    """Requests the policy routed to new in the window."""
    return f"sum(increase({ROUTED}{_sel(selector, _arm('new'))}[{window}]))"


def new_errors(window: str, selector: str = "") -> str:
    """New-arm requests whose client got an error (fallbacks excluded: old answered those)."""
    outcome = f'outcome=~"{ERROR_OUTCOMES}"'
    return f"sum(increase({REQUESTS}{_sel(selector, _arm('new'), outcome)}[{window}]))"


def fallbacks(window: str, selector: str = "") -> str:
    """New-arm requests replayed on old."""
    return f"sum(increase({FALLBACKS}{_sel(selector)}[{window}]))"


def quantile(hist: str, q: float, arm: str, window: str, selector: str = "") -> str:
    """q-quantile of a latency histogram of one arm over the window (seconds)."""
    return f"histogram_quantile({q}, sum by (le) (increase({hist}_bucket{_sel(selector, _arm(arm))}[{window}])))"


def count(hist: str, arm: str, window: str, selector: str = "") -> str:
    """Observations of a histogram for one arm over the window."""
    return f"sum(increase({hist}_count{_sel(selector, _arm(arm))}[{window}]))"
