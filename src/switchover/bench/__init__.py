"""bench: side-by-side load tests of engines on the wire client (workload, scheduler, stats, knee, A/B)."""
