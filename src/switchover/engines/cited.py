"""A cited fact: every engine fact (profiles, the format / compatibility / feature matrices) says where it was read
and whether it was read or inferred; a fact without a source is refused when the data is loaded."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator


class CitedFact(BaseModel):
    """A fact with its `source` (file and line in the version read, or a URL; never blank) and `verified` (False when
    inferred, not read)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    verified: bool

    @field_validator("source")
    @classmethod
    def _cited(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("every engine fact needs a source")
        return value
