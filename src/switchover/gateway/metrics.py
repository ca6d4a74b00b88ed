"""The gateway's own Prometheus metrics (one registry per gateway, served at /metrics)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from switchover.httpfront.budget import KINDS, MemoryBudget
from switchover.ledger_record import Outcome

ARMS = ("old", "new")
# reasons `upstream.open_upstream` and the gateway give, besides status_<code> for the configured statuses
FALLBACK_REASONS = ("timeout", "connect", "disconnected", "malformed", "stream_error", "too_large")

# Latency buckets in seconds: fine below 100 ms (gateway overhead, small models), coarse up to 2 min.
_LAT = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_TPOT = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class GatewayMetrics:
    """Requests per arm and outcome, routing reasons, fallbacks, kill switch, shadow, latency histograms."""

    def __init__(self) -> None:
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry = CollectorRegistry(auto_describe=True)
        p = "switchover_gateway_"
        self.requests = Counter(
            p + "requests", "Requests answered, by the arm that answered and outcome", ["arm", "outcome"], registry=r
        )
        self.routed = Counter(p + "routed", "Routing decisions, by arm and reason", ["arm", "reason"], registry=r)
        self.fallbacks = Counter(p + "fallbacks", "New-arm requests replayed on old, by reason", ["reason"], registry=r)
        self.new_arm_bad = Counter(p + "new_arm_failures", "New-arm requests that fell back or failed", registry=r)
        self.kill_switch = Gauge(p + "kill_switch_latched", "1 while the kill switch holds the weight at 0", registry=r)
        self.kill_switch_trips = Counter(p + "kill_switch_trips", "Times the kill switch tripped", registry=r)
        self.kill_switch_ratio = Gauge(
            p + "kill_switch_ratio", "New-arm failure ratio in the window (NaN below min_samples)", registry=r
        )
        self.weight = Gauge(p + "weight_percent", "Configured weight of new, percent", registry=r)
        self.effective_weight = Gauge(
            p + "effective_weight_percent", "Weight in force (0 under rollback or kill switch)", registry=r
        )
        self.in_flight = Gauge(p + "in_flight", "Requests being served", registry=r)
        self.draining = Gauge(p + "draining", "1 after SIGTERM while in-flight requests finish", registry=r)
        self.reloads = Counter(p + "config_reloads", "Config reloads, by result", ["result"], registry=r)
        self.ttft = Histogram(
            p + "ttft_seconds", "Arrival to first content event, by arm", ["arm"], buckets=_LAT, registry=r
        )
        self.tpot = Histogram(
            p + "tpot_seconds", "(E2E - TTFT) / (tokens - 1), by arm", ["arm"], buckets=_TPOT, registry=r
        )
        self.e2e = Histogram(p + "e2e_seconds", "Arrival to last byte, by arm", ["arm"], buckets=_LAT, registry=r)
        self.shadow = Counter(p + "shadow", "Mirrored requests, by result (ok, error, dropped)", ["result"], registry=r)
        self.refused = Counter(
            p + "refused",
            "Connections and requests the gateway refused itself, by reason "
            "(framing, limits, timeouts, path, client key, body)",
            ["reason"],
            registry=r,
        )
        self.ledger_errors = Counter(p + "ledger_write_errors", "Ledger rows that could not be written", registry=r)
        self.memory = Gauge(
            p + "memory_budget_used_bytes",
            "Bytes drawn from the memory budget now, by kind (request_body, parsed_json, answer, shadow, review)",
            ["kind"],
            registry=r,
        )
        self.memory_limit = Gauge(
            p + "memory_budget_bytes", "The memory budget (limits.memory_budget_bytes)", registry=r
        )
        self.memory_peak = Gauge(
            p + "memory_budget_peak_bytes", "The most ever drawn from the budget at once", registry=r
        )
        self.preset()

    def preset(self, fallback_statuses: Iterable[int] = ()) -> None:
        """Create the labelled series a gate will ask for, at 0, before anything happens: Prometheus's increase()
        cannot see the first increment of a series that did not exist at the previous scrape, so an error or a
        fallback that creates its series would be missed (a gate passing on a false 0)."""
        for arm in ARMS:
            for outcome in get_args(Outcome):
                self.child(self.requests, arm, outcome)
            self.child(self.routed, arm, "weight")
            for h in (self.ttft, self.tpot, self.e2e):
                self.child(h, arm)
        for reason in (*FALLBACK_REASONS, *(f"status_{c}" for c in fallback_statuses)):
            self.child(self.fallbacks, reason)
        for result in ("ok", "error", "dropped"):
            self.child(self.shadow, result)

    def watch_budget(self, budget: MemoryBudget) -> None:
        """The budget's gauges, read at scrape time."""
        for kind in KINDS:
            self.child(self.memory, kind).set_function(lambda k=kind: budget.by_kind.get(k, 0))
        self.memory_limit.set_function(lambda: budget.limit)
        self.memory_peak.set_function(lambda: budget.peak)

    def child(self, metric: Any, *labels: str) -> Any:
        """A labelled child, cached (prometheus_client's labels() takes a lock and builds a tuple each call)."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def count_refused(self, reason: str) -> None:
        """A connection or request the gateway refused itself (a limit, draining, what the client sent)."""
        self.child(self.refused, reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
