"""Importing this package registers every probe (one module per concern)."""

from switchover.probe.catalog import errors, lora, output_format, sampling, stop, streaming, usage, validation

__all__ = ["errors", "lora", "output_format", "sampling", "stop", "streaming", "usage", "validation"]
