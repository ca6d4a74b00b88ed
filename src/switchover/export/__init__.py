"""Exports of the same rollout for clusters: Argo Rollouts, Envoy, Grafana (see docs/export.md)."""
