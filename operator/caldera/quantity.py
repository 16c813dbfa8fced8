"""Kubernetes resource quantities: exact parsing and canonical formatting.

Every resource number that enters Caldera (pod requests, node allocatable, queue capability,
PodGroup minResources) is a Kubernetes ``Quantity`` string, and every number we write back (queue
``status.allocated``) must read the way Kubernetes itself would print it. Parsing is exact (rational
arithmetic, no floats), so ``1G`` and ``1Gi`` stay different and ``0.1`` cpu is exactly ``100m``.

Engine units follow kube-scheduler: cpu in millicores (``MilliValue``), everything else in whole
units (``Value``: bytes for memory and storage, a count for extended resources). Both round up, as
Kubernetes' ``ScaledValue`` does. The quota spellings of cpu (``requests.cpu``, ``limits.cpu``, in
ResourceQuotas and the minResources Volcano's controllers write) are millicores too.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

__all__ = [
    "CPU",
    "QuantityError",
    "format_binary",
    "format_decimal",
    "format_resource",
    "parse_quantity",
    "to_engine_units",
]

CPU = "cpu"
_MILLICORES = frozenset({CPU, "requests.cpu", "limits.cpu"})
_BYTES = frozenset({"memory", "ephemeral-storage", "requests.memory", "limits.memory"})

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {power: suffix for suffix, power in _DECIMAL.items()}
_BINARY_SUFFIX = {0: "", **{power: suffix for suffix, power in _BINARY.items()}}
# Kubernetes' quantity grammar (apimachinery ``resource/quantity.go``), ASCII digits only (``\d``
# would accept other scripts' digits), without the forms its scanner lets through as zero but its
# published validation pattern refuses ("Mi", ".", "-").
_NUMBER = re.compile(r"([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(.*)", re.ASCII | re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)", re.ASCII)
# Kubernetes rejects exponents outside this range long before any real cluster needs them.
_MAX_EXPONENT = 100
_NANO = Fraction(1, 10**9)
# ParseQuantity silently caps a binary-suffixed quantity at the largest int64.
_MAX_BINARY = Fraction(2**63 - 1)


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


def parse_quantity(text: str | float) -> Fraction:
    """Parse a quantity into its exact rational value (``"1.5Gi"`` → ``Fraction(1610612736)``).

    As Kubernetes' ``ParseQuantity`` does, a value finer than a nano is rounded away from zero to
    the next nano (``"0.9n"`` → ``1n``) and a binary-suffixed value is capped at 2^63-1. Numbers
    (as YAML gives them for ``cpu: 2``) read as the decimal text they were written as.
    """
    if isinstance(text, bool):
        raise QuantityError(f"invalid quantity {text!r}: not a number")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"invalid quantity {text!r}")
        return _round_to_nano(Fraction(repr(text)))
    if not isinstance(text, str):
        raise QuantityError(f"invalid quantity {text!r}: expected a string or a number")
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise QuantityError(f"invalid quantity {text!r}")
    sign, digits, suffix = match.groups()
    value = Fraction(digits)
    if suffix in _BINARY:
        value = min(value * 1024 ** _BINARY[suffix], _MAX_BINARY)
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
    else:
        exp = _EXPONENT.fullmatch(suffix)
        if exp is None:
            raise QuantityError(f"invalid quantity {text!r}: unknown suffix {suffix!r}")
        power = int(exp.group(1))
        if abs(power) > _MAX_EXPONENT:
            raise QuantityError(f"invalid quantity {text!r}: exponent out of range")
        value *= Fraction(10) ** power
    value = _round_to_nano(value)
    return -value if sign == "-" else value


def _round_to_nano(value: Fraction) -> Fraction:
    """Round a value finer than a nano away from zero to the next nano."""
    nanos = abs(value) / _NANO
    if nanos.denominator == 1:
        return value
    rounded = math.ceil(nanos) * _NANO
    return -rounded if value < 0 else rounded


def to_engine_units(resource: str, quantity: object) -> float:
    """Convert a quantity to the unit the engine stores: millicores for cpu, whole units otherwise.

    Rounds up like Kubernetes' ``MilliValue``/``Value``. Negative quantities are rejected: no
    request or capacity in Kubernetes may be negative; nor are quantities beyond 2^63-1 engine
    units (the int64 those methods return). Remembered per (resource, quantity): a
    cluster writes the same few quantities on thousands of pods, and exact parsing is slow.
    """
    if not isinstance(quantity, str | int | float):  # a list or map from a manifest: unhashable
        raise QuantityError(
            f"invalid quantity: expected a string or a number, not {type(quantity).__name__}"
        )
    return _to_engine_units(resource, quantity)


@functools.lru_cache(maxsize=16_384)
def _to_engine_units(resource: str, quantity: str | float) -> float:
    value = parse_quantity(quantity)
    if value < 0:
        raise QuantityError(f"invalid quantity {quantity!r}: must not be negative")
    if resource in _MILLICORES:
        value *= 1000
    if value > _MAX_BINARY:  # beyond Kubernetes' int64 MilliValue/Value; sums would overflow
        raise QuantityError(f"invalid quantity {quantity!r}: too large")
    return float(math.ceil(value))


def _exact(value: Fraction | float) -> Fraction:
    """A float is taken as the decimal it prints as (``0.1`` is exactly ``100m``, not the binary
    fraction nearest to it)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"cannot format {value!r} as a quantity")
        return Fraction(repr(value))
    return Fraction(value)


def _canonical_decimal(value: Fraction) -> str:
    """Format like Kubernetes' DecimalSI canonical form: the largest 10^3k suffix that keeps an
    integer mantissa (``1500m``, ``2``, ``12k``); values finer than nano are rounded up to ``n``.
    Beyond ``E`` (10^18) there is no suffix and Kubernetes writes an exponent (``1e21``)."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    nanos = math.ceil(abs(value) * 10**9)
    exponent = -9
    while nanos % 1000 == 0:
        nanos //= 1000
        exponent += 3
    suffix = _DECIMAL_SUFFIX.get(exponent, f"e{exponent}")
    return f"{sign}{nanos}{suffix}"


def format_decimal(value: Fraction | float) -> str:
    """Canonical DecimalSI text for a value in base units (cores, counts)."""
    return _canonical_decimal(_exact(value))


def format_binary(value: Fraction | float) -> str:
    """Canonical BinarySI text (``1536Mi``, ``1Gi``). As Kubernetes prints it, a value strictly
    between -1024 and 1024, or one that is not a whole number, is written in DecimalSI (``1k``,
    ``500m``); a whole number without a factor of 1024 is written plain (``1500000000``)."""
    frac = _exact(value)
    if frac.denominator != 1 or abs(frac) < 1024:
        return _canonical_decimal(frac)
    number = int(frac)
    power = 0
    while power < 6 and number % 1024 == 0:
        number //= 1024
        power += 1
    return f"{number}{_BINARY_SUFFIX[power]}"


def format_resource(resource: str, engine_value: float) -> str:
    """Render an engine value of ``resource`` as the quantity Kubernetes would print."""
    if resource in _MILLICORES:
        return format_decimal(Fraction(round(engine_value)) / 1000)
    if resource in _BYTES or resource.startswith("hugepages-"):
        return format_binary(round(engine_value))
    return format_decimal(round(engine_value))
