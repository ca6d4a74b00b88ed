"""Envoy as switchover's data plane: one renderer (render.py, also behind `export envoy`), the access log's
fields and their ledger rows (accesslog.py), and the process that runs Envoy and keeps it in step (plane.py)."""
