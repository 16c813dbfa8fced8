"""Queue quantities in Volcano's scheduler units, and the text Volcano's messages print them in.

The queue webhook compares capabilities, deserved and guarantees the way Volcano's
``pkg/scheduler/api.Resource`` does: cpu in millicores, memory in bytes, every other resource in
thousandths (``NewResource``; ``pods`` as a plain count). Its messages print a sum as
``Resource.String()`` (``cpu 9000.00, memory 19327352832.00``) and one value as
``formatResourceWithType`` (cpu and memory as quantities, the rest as ``%.2f`` thousandths).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from caldera.api.resources import MEMORY, PODS
from caldera.quantity import (
    CPU,
    QuantityError,
    format_binary,
    format_decimal,
    format_resource,
    parse_quantity,
)

__all__ = [
    "ResourceAmounts",
    "add",
    "canonical",
    "from_engine",
    "is_integer_resource",
    "less_partly",
    "names_of",
    "parse",
    "resource_text",
    "typed_text",
]

ResourceAmounts = dict[str, float]
"""Resource name → amount in Volcano's units."""

_INTEGER_NATIVE = frozenset(
    {
        "pods",
        "count/pods",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
        "resourcequotas",
    }
)


def parse(text: object) -> Fraction | None:
    """The quantity ``text`` stands for, or None when it is not one."""
    if not isinstance(text, str | int | float) or isinstance(text, bool):
        return None
    try:
        return parse_quantity(text)
    except QuantityError:
        return None


def canonical(text: object, value: Fraction) -> str:
    """``Quantity.String()``: the value in the format it was written in (binary suffixes stay
    binary)."""
    if isinstance(text, str) and text.rstrip().endswith("i"):
        return format_binary(value)
    return format_decimal(value)


def is_integer_resource(name: str) -> bool:
    """apimachinery's ``IsIntegerResourceName``: counted objects and extended resources (a
    domain-prefixed name outside ``kubernetes.io``), which take no fractions."""
    if name in _INTEGER_NATIVE:
        return True
    if "/" not in name or name.startswith("requests."):
        return False
    return not (name.startswith("kubernetes.io/") or ".kubernetes.io/" in name.split("/")[0])


def _scale(name: str, base: Fraction | float) -> float:
    """Base units (cores, bytes, counts) → Volcano's units."""
    if name in (MEMORY, PODS):
        return float(base)
    return float(base) * 1000


def from_raw(raw: Mapping[str, object]) -> ResourceAmounts:
    """A ResourceList as sent (quantities that do not parse are left out: reported elsewhere)."""
    out: ResourceAmounts = {}
    for name, text in raw.items():
        value = parse(text)
        if value is not None:
            out[name] = _scale(name, value)
    return out


def from_engine(engine: Mapping[str, float] | None) -> ResourceAmounts:
    """A cached model's ResourceList (engine units: cpu millicores, the rest whole)."""
    return {
        name: value if name in (CPU, MEMORY, PODS) else value * 1000
        for name, value in (engine or {}).items()
    }


def names_of(amounts: Mapping[str, float]) -> list[str]:
    """``Resource.ResourceNames()`` order: cpu, memory, then the rest."""
    fixed = [n for n in (CPU, MEMORY) if amounts.get(n, 0) > 0]
    return fixed + sorted(n for n in amounts if n not in (CPU, MEMORY))


def add(total: ResourceAmounts, more: Mapping[str, float]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0.0) + value


def less_partly(limit: Mapping[str, float], total: Mapping[str, float]) -> bool:
    """``limit.LessPartly(total, Zero)``: cpu or memory below the total, or a resource the limit
    names below the total's (a resource only the total has does not count)."""
    for name in (CPU, MEMORY):
        if limit.get(name, 0.0) < total.get(name, 0.0):
            return True
    return any(
        value < total.get(name, 0.0) for name, value in limit.items() if name not in (CPU, MEMORY)
    )


def resource_text(amounts: Mapping[str, float]) -> str:
    """``Resource.String()``."""
    parts = [f"cpu {amounts.get(CPU, 0.0):0.2f}", f"memory {amounts.get(MEMORY, 0.0):0.2f}"]
    parts += [
        f"{name} {amounts[name]:0.2f}" for name in sorted(amounts) if name not in (CPU, MEMORY)
    ]
    return ", ".join(parts)


def typed_text(name: str, value: float) -> str:
    """``formatResourceWithType``: one amount the way the capability messages print it."""
    return format_resource(name, value) if name in (CPU, MEMORY) else f"{value:.2f}"
