"""gateway: canary + shadow routing in front of the old and new engines."""
