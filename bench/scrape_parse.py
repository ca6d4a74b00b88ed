"""What one /metrics scrape costs the bench's client: parse_metrics on an engine's own exposition (the test fixtures
recorded from the test bed), with only the wanted families' lines handed to the parser and with the whole text.

    python bench/scrape_parse.py [--repeats 50]

Prints the median thread CPU time of each, per engine, and the rows kept (the same both ways).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from switchover.bench.scrape import wanted_series
from switchover.measure import prometheus

DATA = Path(__file__).resolve().parents[1] / "tests" / "measure" / "data"
CASES = {"vllm": ("vllm-0.32.0-metrics.txt", "0.32.0"), "llamacpp": ("llamacpp-b11434-metrics.txt", "b11434")}


def median_ms(text: str, wanted: dict[str, str], repeats: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeats):
        t0 = time.thread_time()
        rows = len(prometheus.parse_metrics(text, wanted, endpoint="e", t_ns=0, wall=0.0))
        times.append(time.thread_time() - t0)
    return statistics.median(times) * 1e3, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=50)
    a = ap.parse_args()
    real = prometheus.wanted_lines
    for engine, (name, version) in CASES.items():
        text = (DATA / name).read_text()
        wanted = wanted_series(engine, version)[0]
        filtered = median_ms(text, wanted, a.repeats)
        prometheus.wanted_lines = lambda t, w: t  # type: ignore[assignment]  # the whole text to the parser
        whole = median_ms(text, wanted, a.repeats)
        prometheus.wanted_lines = real
        print(
            f"{engine} {version} ({len(text) / 1e3:.0f} kB, {text.count(chr(10))} lines): wanted lines only "
            f"{filtered[0]:.2f} ms, whole text {whole[0]:.2f} ms, {filtered[1]} rows ({whole[1]} whole)"
        )


if __name__ == "__main__":
    main()
