"""evidence: the artefacts one verb writes and another reads (bench results, ledger rows, review pairs, drills)."""
