"""Thin typer commands: parse, call one function, render."""
