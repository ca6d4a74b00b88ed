"""review: human spot-checks of the new engine's answers next to the old one's (docs/review.md)."""
