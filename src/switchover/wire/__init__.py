"""wire: the only code that talks to engines."""

from switchover.wire.client import EngineClient, HttpResult, Timeouts
from switchover.wire.error_body import ErrorBody, parse_error_body
from switchover.wire.records import Failure, FailureKind, RequestRecord, Usage
from switchover.wire.sse import SSEEvent, SSEParser

__all__ = [
    "EngineClient",
    "ErrorBody",
    "Failure",
    "FailureKind",
    "HttpResult",
    "RequestRecord",
    "SSEEvent",
    "SSEParser",
    "Timeouts",
    "Usage",
    "parse_error_body",
]
