"""The engines switchover has a profile for, written once: the migration file's `engine:` choices, the format
matrix, the profile loader and help texts read this list (engines/data/<name>.yaml exists for each name)."""

from __future__ import annotations

#: Profile names, in the order help texts list them.
ENGINES: tuple[str, ...] = ("vllm", "sglang", "trtllm", "tgi", "llamacpp")

#: Other spellings a user may write for an engine (after lower-casing and dropping '-', '_' and '.').
ALIASES: dict[str, str] = {"llamaserver": "llamacpp", "tensorrtllm": "trtllm"}

#: What a plain OpenAI-compatible server is called where an engine is asked for (no profile: only the API is assumed).
OPENAI = "openai"


def engine_list(sep: str = ", ") -> str:
    """The engine names for a help text or an error hint, e.g. 'vllm, sglang, trtllm, tgi, llamacpp'."""
    return sep.join(ENGINES)
