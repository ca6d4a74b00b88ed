"""probe: does the new API behave like the old one? A registry of probes, each observing one behaviour."""

from switchover.probe.registry import Probe, all_probes, judge, select
from switchover.probe.report import Observation, ProbeReport, ProbeResult
from switchover.probe.runner import ProbeOptions, Target, run_probes

__all__ = [
    "Observation",
    "Probe",
    "ProbeOptions",
    "ProbeReport",
    "ProbeResult",
    "Target",
    "all_probes",
    "judge",
    "run_probes",
    "select",
]
