"""check: the whole pre-flight in one command — plan, probe, verify, diff-model, an A/B bench ladder and drain
grace, judged against the go/no-go checklist (docs/checklist.md) into one report."""
