"""What an admission rule is given and what it answers, and apimachinery's field-error text.

A rule reads the object under review (as the API server sent it: raw JSON, not yet a model, so a
bad value is reported with its path rather than failing to parse) and the scheduler's cache for
everything else (other queues, namespaces, pods). It returns a merge patch (mutating rules) or
nothing, and raises :class:`Denied` with the message Volcano's webhook gives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from caldera.cache.state import ClusterState

__all__ = [
    "Denied",
    "FieldErrors",
    "Missing",
    "Options",
    "Patch",
    "Review",
    "Unquoted",
    "go_quote",
    "object_name",
    "resource_lists",
]

Patch = dict[str, Any]
"""A JSON merge patch of the object under review (empty: no change)."""


class Denied(Exception):
    """The request is refused; ``str()`` is the message, to which the API server adds
    ``admission webhook "<name>" denied the request: ``."""


class Missing(Denied):
    """Refused because an object it names is not in the cache: the server asks again once the
    cache has caught up (an object created a moment before) before it refuses."""


@dataclass(frozen=True, slots=True)
class Options:
    """The webhook manager's flags (Volcano's names and defaults)."""

    scheduler_names: tuple[str, ...] = ("volcano",)
    default_queue: str = "default"
    max_queue_depth: int = 5
    root_protection: bool = True
    allocated_pods_check: bool = False


@dataclass(frozen=True, slots=True)
class Review:
    """One admission request: the operation, the object (the old one too on UPDATE; on DELETE
    only ``old``, when the API server sends it) and the cluster as the cache holds it."""

    operation: str
    name: str
    namespace: str
    obj: Mapping[str, Any]
    state: ClusterState
    old: Mapping[str, Any] | None = None
    options: Options = field(default_factory=Options)

    @property
    def spec(self) -> Mapping[str, Any]:
        return _mapping(self.obj.get("spec"))

    @property
    def annotations(self) -> Mapping[str, Any]:
        return _mapping(_mapping(self.obj.get("metadata")).get("annotations"))


def object_name(meta: Mapping[str, Any]) -> str:
    """An object's name, or its ``generateName`` while the API server has not made one."""
    return str(meta.get("name") or meta.get("generateName") or "")


def resource_lists(spec: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """A Queue spec's ``capability``, ``deserved`` and ``guarantee.resource`` as written (each
    may be missing or of any type)."""
    guarantee = spec.get("guarantee")
    lists = spec.get("capability"), spec.get("deserved")
    return (*lists, guarantee.get("resource") if isinstance(guarantee, Mapping) else None)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


class Unquoted(str):
    """A value printed as is in ``Invalid value: …`` (a struct, which apimachinery prints as
    JSON)."""


def go_quote(value: object) -> str:
    """A value as apimachinery prints it in ``Invalid value: …``: strings quoted (Go's %q)."""
    if isinstance(value, str) and not isinstance(value, Unquoted):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


class FieldErrors:
    """apimachinery's ``field.ErrorList``: ``<path>: Invalid value: <value>: <detail>`` per error,
    and ``ToAggregate`` (one error as is; several in ``[…]``, comma-joined, duplicates once)."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def invalid(self, path: str, value: object, detail: str) -> None:
        self.messages.append(f"{path}: Invalid value: {go_quote(value)}: {detail}")

    def raise_any(self) -> None:
        unique = list(dict.fromkeys(self.messages))
        if len(unique) == 1:
            raise Denied(unique[0])
        if unique:
            raise Denied("[" + ", ".join(unique) + "]")
