"""Engine knowledge as cited data: flags by intent, API semantics, metrics, readiness and memory semantics."""

from switchover.engines.launch_spec import FlagSpec, LaunchSyntax
from switchover.engines.profile import (
    METRIC_INTENTS,
    ApiSemantics,
    DefaultValue,
    EngineProfile,
    MemorySemantics,
    MetricsEndpoint,
    MetricSpec,
    Overhead,
    Readiness,
    list_profiles,
    load_profile,
)

__all__ = [
    "METRIC_INTENTS",
    "ApiSemantics",
    "DefaultValue",
    "EngineProfile",
    "FlagSpec",
    "LaunchSyntax",
    "MemorySemantics",
    "MetricSpec",
    "MetricsEndpoint",
    "Overhead",
    "Readiness",
    "list_profiles",
    "load_profile",
]
