"""A PromQL query with no series is 'nothing measured', not zero traffic: the window says so in a warning."""

from __future__ import annotations

from switchover.config.rollout import PrometheusSource
from switchover.evidence import gateway_series as mn
from switchover.rollout.prometheus_window import stats_from_prometheus
from tests.rollout.test_gates import _FakePrometheus, prometheus  # noqa: F401  (fixture)


def test_no_series_for_new_requests_is_a_warning_not_a_silent_zero(prometheus: str) -> None:  # noqa: F811
    _FakePrometheus.queries = []
    _FakePrometheus.answers = {}
    s = stats_from_prometheus(PrometheusSource(url=prometheus, selector='job="wrong"'), window_s=60)
    assert s.new.requests == 0
    assert any("no series for new's requests" in w and 'job="wrong"' in w for w in s.warnings)


def test_traffic_with_no_errors_yet_is_not_a_warning(prometheus: str) -> None:  # noqa: F811
    _FakePrometheus.queries = []
    _FakePrometheus.answers = {f'{mn.ROUTED}{{arm="new",job="gw"}}': 50.0}
    s = stats_from_prometheus(PrometheusSource(url=prometheus, selector='job="gw"'), window_s=60)
    assert s.new.requests == 50 and s.new.errors == 0 and not s.warnings
