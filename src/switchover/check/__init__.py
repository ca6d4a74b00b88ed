"""check: the whole pre-flight in one command — plan, probe, verify, diff-model, an A/B bench ladder and drain
grace, judged against the seeds' checklists into one go/no-go report."""
