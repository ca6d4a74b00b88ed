"""Reading the packaged matrix data (engines/data/matrix/*.yaml: formats, compat, features) and validating it, or a
user's file in the same shape, with one clear line naming the bad field."""

from __future__ import annotations

from importlib import resources
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from switchover.errors import BadInput

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: Any, what: str) -> M:
    """`data` as a `model`; BadInput naming `what` and the first bad field otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise BadInput(f"{what}: {loc + ': ' if loc else ''}{first['msg'].removeprefix('Value error, ')}") from None


def packaged(name: str) -> Any:
    """The parsed YAML of engines/data/matrix/<name>."""
    return yaml.safe_load(
        resources.files("switchover.engines").joinpath("data", "matrix", name).read_text(encoding="utf-8")
    )
