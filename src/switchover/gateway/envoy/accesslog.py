"""Envoy's JSON access log (its own formatter) and the ledger row each line becomes, in the SAME schema as the
built-in gateway's rows (ledger_record.LedgerRecord), so rollout compare, the gates, review and check read either
data plane. Pure: a line in, a row out.

Command operators: https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/observability/access_log/usage
What Envoy cannot see is null, never guessed (docs/gateway.md, Data planes): the model asked for and every token
figure (the body is not parsed), ttft_ms / tpot_ms (Envoy times the first upstream byte, not the first token:
`first_byte_ms` below is kept out of the row for that reason). Mirrors are measured apart (mirror.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from switchover.gateway.headers import request_id as clean_request_id
from switchover.gateway.policy import tenant_hash

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

    def of_host(self, host: str | None) -> str | None:
        return self.addresses.get(host) if host else None


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


def _routed(route: str | None, cluster: str | None) -> tuple[str | None, str | None]:
    """(routed arm, route_reason) from the route's name and the weighted cluster chosen."""
    if route in ("bypass", "rollback", "kill_switch"):
        return "old", route
    if route == "weight":
        if cluster in ("new_then_old", "new"):
            return "new", "weight"
        return ("old", "weight") if cluster == "old" else (None, "weight")
    return None, None


def _outcome(status: int, routed: str | None, arm: str | None, flags: set[str], stream: bool) -> str:
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


def to_row(line: bytes, arms: Arms, seed: bytes = b"") -> dict[str, Any] | None:
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
    tenant = _text(raw.get(TENANT))
    path = (_text(raw.get("path")) or "").partition("?")[0]
    row: dict[str, Any] = {
        "ts": ts,
        "request_id": clean_request_id(_text(raw.get("request_id"))),
        "tenant": tenant_hash(tenant, seed),
        "bucket": None,
        "path": path,
        "routed": routed,
        "route_reason": reason,
        "arm": arm,
        "fallback_reason": None,
        "outcome": outcome,
        "status": status,
        "stream": stream,
        "model": None,
        "ttft_ms": None,
        "tpot_ms": None,
        "e2e_ms": None if duration is None or request_ms is None or arm is None else max(0.0, duration - request_ms),
        "prompt_tokens": None,
        "completion_tokens": None,
        "finish_reason": None,
        "shadowed": None,
        "tokens_source": None,
    }
    if outcome == "fallback_ok":
        row["fallback_reason"] = _fallback_reason(flags, _num(raw.get("attempts")))
    if outcome in ("error", "failed_mid_stream", "refused", "bad_request"):
        row["error"] = _text(raw.get("details")) or ",".join(sorted(flags)) or f"status_{status}"
    return row


def counts_against_new(row: dict[str, Any]) -> bool | None:
    """For the kill switch, as the built-in gateway counts: None when the row says nothing about new; else
    whether it was bad (a fallback, or new failing with a 5xx or mid-stream)."""
    if row.get("routed") != "new" or row.get("outcome") in (
        "client_disconnected",
        "drain_cutoff",
        "gateway_error",
        "refused",
        "bad_request",
    ):
        return None
    if row.get("fallback_reason"):
        return True
    return row.get("arm") == "new" and (
        row["outcome"] == "failed_mid_stream" or (row["outcome"] == "error" and row["status"] >= 500)
    )
