"""Label and field selectors, parsed and matched as the apiserver does.

The scheduler lists and watches with selectors such as ``spec.schedulerName=caldera`` and
``spec.nodeName=`` (unassigned pods), so the emulator must apply them to lists and to watch
streams. Parsing follows ``k8s.io/apimachinery/pkg/labels`` (equality, inequality, ``in``,
``notin``, existence) and ``pkg/fields`` (``=``, ``==``, ``!=`` with ``\\``-escapes); unsupported
field paths are rejected with 400 like a real server does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emulator.discovery import ResourceType
from emulator.errors import bad_request

_LABEL_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_LABEL_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*(?P<key>{_LABEL_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*(?P<key>{_LABEL_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_LABEL_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_LABEL_KEY})\s*$")


@dataclass(frozen=True)
class Requirement:
    """One label requirement; ``op``: ``=``, ``!=``, ``in``, ``notin``, ``exists`` or ``!``."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        match self.op:
            case "exists":
                return present
            case "!":
                return not present
            case "=" | "in":
                return present and value in self.values
            case _:  # "!=" and "notin" also match objects that lack the label
                return not present or value not in self.values


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    """Parse a ``labelSelector`` query value; raises a 400 ``ApiError`` on bad syntax."""
    if not text:
        return ()
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        if m := _SET_RE.match(part):
            values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
            requirements.append(Requirement(m["key"], m["op"], values))
        elif m := _EQ_RE.match(part):
            op = "!=" if m["op"] == "!=" else "="
            requirements.append(Requirement(m["key"], op, frozenset({m["value"]})))
        elif m := _EXISTS_RE.match(part):
            requirements.append(Requirement(m["key"], "!" if m["neg"] else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: invalid label selector {part!r}")
    return tuple(requirements)


def labels_match(requirements: tuple[Requirement, ...], obj: Mapping[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(req.matches(labels) for req in requirements)


@dataclass(frozen=True)
class FieldTerm:
    path: str
    value: str
    negated: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.path) == self.value) != self.negated


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string form of a field as the apiserver's field-label conversion renders it."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def _split_escaped(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _split_term(part: str, text: str) -> tuple[str, str, bool]:
    """``path``, ``value`` and whether the term is ``!=``, for one comma-separated term."""
    for op in ("!=", "==", "="):
        index = part.find(op)
        while index > 0 and part[index - 1] == "\\":
            index = part.find(op, index + 1)
        if index >= 0:
            return part[:index].strip(), _unescape(part[index + len(op) :]), op == "!="
    raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")


def parse_field_selector(text: str | None, rt: ResourceType) -> tuple[FieldTerm, ...]:
    """Parse a ``fieldSelector``; unknown field paths for ``rt`` are a 400 like on a real server."""
    if not text:
        return ()
    terms: list[FieldTerm] = []
    for part in _split_escaped(text, ","):
        if not part.strip():
            continue
        path, value, negated = _split_term(part, text)
        if not rt.supports_field(path):
            if rt.custom:
                raise bad_request(
                    f'"{path}" is not a known field selector: only "metadata.name", '
                    f'"metadata.namespace"'
                )
            raise bad_request(f'field label not supported: "{path}"')
        terms.append(FieldTerm(path, value, negated))
    return tuple(terms)


def fields_match(terms: tuple[FieldTerm, ...], obj: Mapping[str, Any]) -> bool:
    return all(term.matches(obj) for term in terms)


@dataclass(frozen=True)
class Selector:
    """A parsed pair of label and field selectors plus an optional namespace restriction."""

    namespace: str | None = None
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldTerm, ...] = ()

    @classmethod
    def parse(
        cls,
        rt: ResourceType,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Selector:
        return cls(
            namespace=namespace if rt.namespaced else None,
            labels=parse_label_selector(label_selector),
            fields=parse_field_selector(field_selector, rt),
        )

    @property
    def is_empty(self) -> bool:
        """No label or field selector (a namespace may still be named)."""
        return not self.labels and not self.fields

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return labels_match(self.labels, obj) and fields_match(self.fields, obj)
