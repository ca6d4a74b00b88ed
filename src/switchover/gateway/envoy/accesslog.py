"""Envoy's JSON access log (its own formatter) and the ledger row each line becomes, in the SAME schema as the
built-in gateway's rows (ledger_record.RequestRow), so rollout compare, the gates, review and check read either
data plane. Pure: a line in, a row out.

Command operators: https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/observability/access_log/usage
The answer's own figures come from the plane's Lua filter (lua.py) through %DYNAMIC_METADATA(switchover:...)%: the
tenant's hash and bucket, usage.completion_tokens / prompt_tokens (tokens_source 'usage'), finish_reason, and
ttft_ms (the first event with text, microsecond clock). What neither sees is null, never guessed (docs/gateway.md,
Data planes): the model asked for, a stream's tokens without usage. Envoy's own %RESPONSE_DURATION% times the first
upstream byte, not the first token, so it is kept out of the row. Mirrors are measured apart (mirror.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import orjson

from switchover.gateway.envoy.lua import NAMESPACE
from switchover.gateway.headers import request_id as clean_request_id
from switchover.gateway.policy import BUCKETS, tenant_hash
from switchover.ledger_record import NOT_AN_ARM_OUTCOMES, Arm, Outcome, RequestRow
from switchover.measure.timing import tpot_ms

FIELDS_BASE = {
    "ts": "%START_TIME(%s.%3f)%",
    "request_id": "%REQ(X-REQUEST-ID)%",
    "path": "%REQ(:PATH)%",
    "route": "%ROUTE_NAME%",
    "cluster": "%UPSTREAM_CLUSTER%",
    "host": "%UPSTREAM_HOST%",
    "status": "%RESPONSE_CODE%",
    "flags": "%RESPONSE_FLAGS%",
    "details": "%RESPONSE_CODE_DETAILS%",
    "attempts": "%UPSTREAM_REQUEST_ATTEMPT_COUNT%",
    "bytes_sent": "%BYTES_SENT%",
    "duration_ms": "%DURATION%",  # first byte of the request to the last byte of the response sent
    "request_ms": "%REQUEST_DURATION%",  # first to last byte of the request received
    "first_byte_ms": "%RESPONSE_DURATION%",  # first byte of the request to the first byte from upstream
    "content_type": "%RESP(CONTENT-TYPE)%",
    "failure": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
    **{k: f"%DYNAMIC_METADATA({NAMESPACE}:{k})%" for k in ("tenant_hash", "bucket", "usage")},
    **{k: f"%DYNAMIC_METADATA({NAMESPACE}:{k})%" for k in ("completion_tokens", "prompt_tokens", "finish_reason")},
    "ttft_ms": f"%DYNAMIC_METADATA({NAMESPACE}:ttft_ms)%",
}
TENANT = "tenant"
PEER = "peer"
# RESPONSE_FLAGS that say the client went away, and that the upstream broke (Envoy's short names)
CLIENT_GONE = {"DC", "DPE"}
UPSTREAM_BROKE = {"UC", "UF", "URX", "UT", "UPE", "UMSDR", "UO", "UH", "NC"}
# answered by Envoy itself for what the client sent (too big, too slow, malformed)
CLIENT_FAULT_STATUS = {400, 404, 405, 408, 413, 414, 431}


def log_fields(tenant_header: str) -> dict[str, str]:
    """The json_format of the access log: the fields above plus the tenant header (hashed before it is stored)."""
    return {**FIELDS_BASE, TENANT: f"%REQ({tenant_header.upper()})%"}


@dataclass(frozen=True)
class Arms:
    """How a line's upstream names an arm: the aggregate cluster's name, and each arm's address."""

    addresses: dict[str, str]  # 'host:port' -> 'old' | 'new'

    def of_host(self, host: str | None) -> Arm | None:
        return cast("Arm | None", self.addresses.get(host) if host else None)  # the plane maps to 'old' / 'new' only


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value not in ("", "-"):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value not in ("", "-") else None


def _routed(route: str | None, cluster: str | None) -> tuple[Arm | None, str | None]:
    """(routed arm, route_reason) from the route's name and the weighted cluster chosen."""
    if route in ("bypass", "rollback", "kill_switch"):
        return "old", route
    if route == "weight":
        if cluster in ("new_then_old", "new"):
            return "new", "weight"
        return ("old", "weight") if cluster == "old" else (None, "weight")
    return None, None


def _outcome(status: int, routed: Arm | None, arm: Arm | None, flags: set[str], stream: bool) -> Outcome:
    if flags & CLIENT_GONE:
        return "client_disconnected"
    if routed is None:
        return "bad_request" if status in CLIENT_FAULT_STATUS or status < 500 else "refused"
    if arm is None:
        return "bad_request" if status in CLIENT_FAULT_STATUS else "error"
    if status >= 400:
        return "error"
    if flags & UPSTREAM_BROKE and stream:
        return "failed_mid_stream"  # headers were sent, then the upstream broke: the client saw a cut stream
    return "fallback_ok" if routed == "new" and arm == "old" else "ok"


def _fallback_reason(flags: set[str], attempts: float | None) -> str:
    if flags & {"UF", "UH", "NC"}:
        return "connect"
    if "UT" in flags:
        return "timeout"
    # a retriable status or a reset of new before the headers: the log line does not tell which
    return "retried" if (attempts or 0) > 1 else "unknown"


def _count(value: Any) -> int | None:
    n = _num(value)
    return int(n) if n is not None and n >= 0 and n == int(n) else None


def _tenant(raw: dict[str, Any], seed: bytes) -> tuple[str, int | None]:
    """The tenant's hash and bucket as the Lua filter computed them (policy.tenant_hash with the seed), else the
    hash of the raw header here (a line from a filter that did not run) with no bucket."""
    given, bucket = _text(raw.get("tenant_hash")), _count(raw.get("bucket"))
    if given and len(given) == 16 and all(c in "0123456789abcdef" for c in given):
        return given, bucket if bucket is not None and bucket < BUCKETS else None
    return tenant_hash(_text(raw.get(TENANT)), seed), None


def _answer(raw: dict[str, Any], stream: bool, e2e: float | None) -> dict[str, Any]:
    """What the Lua filter read in the answer: tokens from usage (else null), finish_reason, TTFT and TPOT."""
    done = _count(raw.get("completion_tokens"))
    from_usage = raw.get("usage") is True and done is not None
    ttft = _num(raw.get("ttft_ms")) if stream else None
    ttft = ttft if ttft is not None and ttft >= 0 else None
    n = done if from_usage else None
    finish = _text(raw.get("finish_reason"))
    return {
        "ttft_ms": ttft,
        "tpot_ms": tpot_ms(ttft, e2e, n),
        "prompt_tokens": _count(raw.get("prompt_tokens")),
        "completion_tokens": n,
        "finish_reason": finish[:40] if finish else None,
        "tokens_source": "usage" if from_usage else None,
    }


def request_row(line: bytes, arms: Arms, seed: bytes = b"") -> RequestRow | None:
    """The ledger row for one access-log line; None for a line that is not one (or a control-path request)."""
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(raw, dict) or raw.get("route") == "control":
        return None
    status_f, ts = _num(raw.get("status")), _num(raw.get("ts"))
    if status_f is None or ts is None:
        return None
    status = int(status_f)
    flags = set((_text(raw.get("flags")) or "").split(","))
    flags.discard("")
    routed, reason = _routed(_text(raw.get("route")), _text(raw.get("cluster")))
    arm = arms.of_host(_text(raw.get("host"))) if routed is not None else None
    stream = (_text(raw.get("content_type")) or "").startswith("text/event-stream")
    outcome = _outcome(status, routed, arm, flags, stream)
    duration, request_ms = _num(raw.get("duration_ms")), _num(raw.get("request_ms"))
    e2e = None if duration is None or request_ms is None or arm is None else max(0.0, duration - request_ms)
    tenant, bucket = _tenant(raw, seed)
    path = (_text(raw.get("path")) or "").partition("?")[0]
    row = RequestRow(
        ts=ts,
        request_id=clean_request_id(_text(raw.get("request_id"))),
        tenant=tenant,
        bucket=bucket,
        path=path,
        routed=routed,
        route_reason=reason,
        arm=arm,
        outcome=outcome,
        status=status,
        stream=stream,
        e2e_ms=e2e,
        **_answer(raw if arm is not None and 200 <= status < 300 else {}, stream, e2e),
    )
    if outcome == "fallback_ok":
        row.fallback_reason = _fallback_reason(flags, _num(raw.get("attempts")))
    if outcome in ("error", "failed_mid_stream", "refused", "bad_request"):
        row.error = _text(raw.get("details")) or ",".join(sorted(flags)) or f"status_{status}"
    return row


def counts_against_new(row: RequestRow) -> bool | None:
    """For the kill switch, as the built-in gateway counts: None when the row says nothing about new; else
    whether it was bad (a fallback, or new failing with a 5xx or mid-stream)."""
    if row.routed != "new" or row.outcome in NOT_AN_ARM_OUTCOMES:
        return None
    if row.fallback_reason:
        return True
    return row.arm == "new" and (row.outcome == "failed_mid_stream" or (row.outcome == "error" and row.status >= 500))
