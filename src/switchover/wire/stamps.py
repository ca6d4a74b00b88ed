"""Kernel receive timestamps for the raw transport (wire/raw_http.py): the socket option, converting a stamp to
the `perf_counter_ns` clock, and counting which reads got one.

On Linux (x86-64/arm64) a socket with SO_TIMESTAMPNS hands `recvmsg` the kernel's receive time of the read's last
bytes as ancillary data, in realtime. It is converted with the offset between realtime and perf_counter read right
then, inside a perf_counter bracket (a bracket stretched by preemption is read again), and accepted only between
the request's send (or the previous read) and now, within the bracket's error; otherwise the read keeps its
user-space arrival time and is counted as such.
"""

from __future__ import annotations

import contextlib
import platform
import socket
import struct
import sys
import time
from dataclasses import dataclass

_NS = 1_000_000_000

# SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) from asm-generic/socket.h, which x86-64 and arm64 use; Python's socket module
# does not name it. Other architectures number it differently: there, reads are stamped in user space.
SO_TIMESTAMPNS = 35 if sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64", "arm64") else None
ANC_SPACE = socket.CMSG_SPACE(16) if SO_TIMESTAMPNS is not None else 0  # recvmsg's ancillary buffer size
_TIMESPEC = struct.Struct("@qq")


def enable(sock: socket.socket) -> None:
    """Ask the kernel for receive timestamps on this socket, where it has them (silently none elsewhere)."""
    if SO_TIMESTAMPNS is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


@dataclass(slots=True)
class StampCounts:
    """How many socket reads got a kernel receive timestamp, and how many were stamped in user space."""

    kernel: int = 0
    user: int = 0

    def describe(self) -> str | None:
        """What a report says about its chunk timestamps (None before any read)."""
        if self.kernel and not self.user:
            return "kernel receive time (SO_TIMESTAMPNS)"
        if self.user and not self.kernel:
            return "user space, on arrival in the event loop (no kernel receive timestamps here)"
        if self.kernel or self.user:
            return f"mixed: {self.kernel} reads kernel-stamped, {self.user} stamped in user space"
        return None


def clock_offset(before: int) -> tuple[int, int]:
    """(time_ns - perf_counter_ns, error bound in ns): realtime read between two perf_counter reads, the offset
    taken at their midpoint. A bracket stretched by preemption is read again (at most twice more) and the
    narrowest kept, so one descheduling cannot shift a stamp by milliseconds."""
    best_off, best_err = 0, -1
    a = before
    for _ in range(3):
        t = time.time_ns()
        b = time.perf_counter_ns()
        err = (b - a + 1) // 2
        if best_err < 0 or err < best_err:
            best_off, best_err = t - (a + b) // 2, err
        if err <= 20_000:  # 20 µs: not preempted
            break
        a = time.perf_counter_ns()
    return best_off, best_err


def read_time(anc: list[tuple[int, int, bytes]], now: int, floor: int, counts: StampCounts) -> int:
    """The perf_counter time to give a read made at `now`: its kernel stamp when there is a usable one, else `now`
    (never before `floor`, the send or the previous read); counted either way."""
    if anc:
        sec, nsec = _TIMESPEC.unpack_from(anc[0][2])
        offset, err = clock_offset(now)
        # an NTP step between the packet and this read is the only error beyond `err`
        stamp: int = sec * _NS + nsec - offset
        if floor - err <= stamp <= now + err:
            counts.kernel += 1
            return min(max(stamp, floor), now)
    counts.user += 1  # no stamp, or a clock step put it after now or before the floor: the arrival time
    return max(now, floor)
