"""What a rollback drill measured (drill.json): the time from stopping new to the first good answer on old, which
the rollout's holding window, its rollback view and the check's rollback item read."""

from __future__ import annotations

from pydantic import BaseModel, Field

from switchover.warmup import Warmup


class DrillResult(BaseModel):
    """Timings of one drill, in seconds (perf_counter); `recovery_s` is the figure for the report."""

    url: str
    stop_command: str
    start_command: str
    started_wall: float = Field(description="Wall-clock start (label only)")
    stop_s: float | None = Field(default=None, description="Stop command issued → exited")
    stop_exit_code: int | None = None
    start_s: float | None = Field(default=None, description="Start command issued → exited (None: runs in foreground)")
    start_exit_code: int | None = None
    foreground_pid: int | None = Field(default=None, description="The start command still running as the server")
    ready_after_start_s: float | None = Field(default=None, description="Start command issued → first good response")
    recovery_s: float | None = Field(default=None, description="Stop issued → first good response on the old engine")
    checks: int = Field(default=0, description="Readiness checks made")
    last_state: str | None = None
    last_reason: str | None = None
    ok: bool = False
    reason: str = ""
    model: str | None = Field(default=None, description="The model the first good response came from")
    max_recovery_s: float | None = None
    within_budget: bool | None = None
    warmup: Warmup | None = Field(
        default=None,
        description="The warm-up tail after the first good response (switchover.warmup); None: not measured",
    )
    switch_s: float | None = Field(
        default=None,
        description="Stop issued → old at its steady TTFT (recovery_s + the "
        "warm-up tail); None: warm-up not measured or not steady",
    )
