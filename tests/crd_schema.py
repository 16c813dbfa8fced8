"""Checking objects against our CRDs' schemas as the API server does, for the tests.

Implements the subset of OpenAPI v3 that structural CRD schemas use, with the API server's
semantics: a value keyword applies only to values of its type (a quantity's ``pattern`` to the
string form only), ``metadata`` is ObjectMeta and checked elsewhere, and a field the schema does
not name is an error, as ``kubectl`` (server-side field validation ``Strict``) reports it. The
only CEL rules in our CRDs are the HyperNode selector's, written in a tiny subset (``has()``,
``||``, ``?:``, ``+``, ``<=``) that is translated to Python here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

Obj = dict[str, Any]

JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "number": (int, float),
}

_CEL_TO_PYTHON = [
    (re.compile(r"has\(self\.(\w+)\)"), r"('\1' in sel)"),
    (re.compile(r"\((\('\w+' in sel\)) \? 1 : 0\)"), r"(1 if \1 else 0)"),
    (re.compile(r"\|\|"), "or"),
]


def cel_subset(rule: str, selector: Obj) -> bool:
    """A CEL rule of the subset above, evaluated on ``selector`` (bound to ``self``)."""
    expr = rule
    for pattern, replacement in _CEL_TO_PYTHON:
        expr = pattern.sub(replacement, expr)
    assert re.fullmatch(r"[\w\s'()+<=]+", expr), f"untranslated CEL left in {expr!r}"
    result = eval(expr, {"__builtins__": {}}, {"sel": selector})
    assert isinstance(result, bool)
    return result


def _fits_type(node: Obj, value: Any) -> bool:
    if node.get("x-kubernetes-int-or-string"):
        return type(value) in (int, str)
    return type(value) in JSON_TYPES[node["type"]]  # exact: a bool is not an integer


def _value_errors(node: Obj, value: Any, path: str) -> Iterator[str]:
    """The keywords that apply to this value's own type."""
    if isinstance(value, str):
        if "maxLength" in node and len(value) > node["maxLength"]:
            yield f"{path}: longer than {node['maxLength']}"
        if "minLength" in node and len(value) < node["minLength"]:
            yield f"{path}: shorter than {node['minLength']}"
        if "pattern" in node and re.search(node["pattern"], value) is None:
            yield f"{path}: {value!r} does not match {node['pattern']}"
        if node.get("format") == "date-time":
            try:
                datetime.fromisoformat(value)
            except ValueError:
                yield f"{path}: {value!r} is not a date-time"
    if type(value) in (int, float):
        if "minimum" in node and value < node["minimum"]:
            yield f"{path}: {value} below {node['minimum']}"
        if "maximum" in node and value > node["maximum"]:
            yield f"{path}: {value} above {node['maximum']}"
    if isinstance(value, list) and "minItems" in node and len(value) < node["minItems"]:
        yield f"{path}: fewer than {node['minItems']} items"
    if "enum" in node and value not in node["enum"]:
        yield f"{path}: {value!r} not one of {node['enum']}"


def errors(node: Obj, value: Any, path: str = "") -> list[str]:
    """Everything the API server would refuse in ``value`` under schema ``node`` ([] = admitted)."""
    where = path or "<root>"
    if not _fits_type(node, value):
        return [f"{where}: {type(value).__name__} where the schema wants {node.get('type')}"]
    out = list(_value_errors(node, value, where))
    if isinstance(value, dict):
        properties: Obj = node.get("properties", {})
        out.extend(f"{where}: {k} is required" for k in node.get("required", []) if k not in value)
        for key, child in value.items():
            sub = f"{path}.{key}" if path else key
            if not path and key == "metadata":
                continue  # ObjectMeta: validated by the API server, not by the CRD schema
            if key in properties:
                out += errors(properties[key], child, sub)
            elif isinstance(node.get("additionalProperties"), dict):
                out += errors(node["additionalProperties"], child, sub)
            elif not node.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{sub}: unknown field")
        for rule in node.get("x-kubernetes-validations", []):
            if not cel_subset(rule["rule"], value):
                out.append(f"{where}: {rule['message']}")
    if isinstance(value, list):
        for i, item in enumerate(value):
            out += errors(node["items"], item, f"{where}[{i}]")
    return out
