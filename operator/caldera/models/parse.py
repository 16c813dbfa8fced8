"""Turn raw API objects (dicts from YAML or a watch event) into models, with readable errors.

A malformed object yields a :class:`ObjectError` that names the kind, the object and the field
(``Pod default/web-0: spec.containers[0].resources.requests: cpu: invalid quantity '1x'``), so
callers can report it and carry on with the other objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from caldera.models.kinds import KINDS as _KINDS
from caldera.models.kinds import Model, kind_label
from caldera.models.record import Record, RecordError, error_text

KINDS: dict[str, type[Model]] = {name: kind.model for name, kind in _KINDS.items()}
NAMESPACED = frozenset(name for name, kind in _KINDS.items() if kind.namespaced)


@dataclass(frozen=True, slots=True)
class ObjectError:
    """An object that cannot be used (malformed, or unusable in this session), and why."""

    kind: str
    name: str
    message: str

    def __str__(self) -> str:
        return f"{kind_label(self.kind)} {self.name}: {self.message}"


def describe(kind: str, raw: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced kinds (``default`` when unset), ``name`` for the
    scheduler's cluster-scoped kinds; for other kinds, ``namespace/name`` if one is stated."""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or "<unnamed>")
    ns = meta.get("namespace")
    if kind in NAMESPACED:
        return f"{ns or 'default'}/{name}"
    if kind not in KINDS and ns:
        return f"{ns}/{name}"
    return name


def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def parse_object(kind: str, raw: Mapping[str, Any]) -> Model | ObjectError:
    """Validate ``raw`` as ``kind``; namespaced kinds without a namespace get ``default``."""
    model = KINDS[kind]
    data = dict(raw)
    if kind in NAMESPACED:
        meta = data.get("metadata")
        if isinstance(meta, Mapping) and not meta.get("namespace"):
            data["metadata"] = {**meta, "namespace": "default"}
    try:
        return model.model_validate(data)
    except RecordError as exc:  # a slim kind: msgspec names the first field at fault
        slim = model if issubclass(model, Record) else None
        return ObjectError(kind, describe(kind, raw), error_text(exc, slim))
    except ValidationError as exc:
        errors = _relevant(exc.errors())
        messages = []
        for err in errors[:3]:
            loc = _loc(tuple(err["loc"]))
            msg = err["msg"].removeprefix("Value error, ")
            messages.append(f"{loc}: {msg}" if loc else msg)
        more = len(errors) - len(messages)
        text = "; ".join(messages) + (f" (and {more} more)" if more > 0 else "")
        return ObjectError(kind, describe(kind, raw), text)


def _relevant(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """Drop the "too short" error pydantic adds to a list whose only items failed validation
    (``containers: [{bad}]`` would also read "should have at least 1 item"): the item's own error
    is the one to report."""
    locs = [tuple(err["loc"]) for err in errors]

    def shadowed(loc: tuple[int | str, ...]) -> bool:
        return any(len(other) > len(loc) and other[: len(loc)] == loc for other in locs)

    return [
        err for err in errors if not (err["type"] == "too_short" and shadowed(tuple(err["loc"])))
    ]
