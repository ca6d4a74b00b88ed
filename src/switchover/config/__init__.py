"""config: the migration file `switchover.yaml` and the schema of each of its sections.

`migration.py` holds the top level (old/new endpoints, the line-aware loader, the JSON Schema); `gateway.py`,
`rollout.py` (with `rollout_custom.py` and `rollout_holding.py`), `bench.py` and `check.py` hold one section each.
The package imports no other switchover package but the leaf modules (inputs, errors, yamlfile, expr,
ledger_record), so every package may import it without a cycle.
"""

from switchover.config.migration import Endpoint, Engine, Migration, load_migration, migration_schema

__all__ = ["Endpoint", "Engine", "Migration", "load_migration", "migration_schema"]
