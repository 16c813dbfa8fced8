"""Device selectors: kube's DRA CEL environment over the devices of one session.

A DeviceClass or a claim's request selects devices with CEL expressions over ``device.driver``,
``device.attributes["domain"].name``, ``device.capacity["domain"].name`` and
``device.allowMultipleAllocations``. The expressions run on the ``common-expression-language``
library (module ``cel``); this module adds what kube's environment has on top of standard CEL:

- the input as kube builds it: attribute and capacity names without a domain belong to the
  driver's domain, versions are semantic versions, capacities are quantities, and looking up a
  domain the device does not have gives an empty map (so ``device.attributes["d"].x`` fails with
  ``no such key: x``, not on the domain);
- Kubernetes' quantity library (``quantity("1Gi")``, ``isQuantity``, ``sign``, ``isInteger``,
  ``asInteger``, ``asApproximateFloat``, ``add``, ``sub``, ``isGreaterThan``, ``isLessThan``,
  ``compareTo``) and semver library (``semver("1.2.3")``, ``isSemver``, ``major``, ``minor``,
  ``patch`` and the same comparisons). A quantity or version is an opaque map inside CEL: a
  quantity holds its exact value, so ``==`` compares values (``quantity("1Gi") ==
  quantity("1024Mi")``);
- errors in kube's words: ``no such key: x`` (with kube's hint to use ``has()``), ``no such
  overload``, a result that is not a bool.

Each distinct expression is compiled once per session and evaluated once per device, lazily, the
first time a request needs it; the result is a bool per device plus the error text of the devices
where evaluation failed. Not modelled: ``cel.bind`` and optional syntax (``[?"x"]``), which the
library does not parse (such an expression fails to compile), and static type checking (a typo in
a field name is a runtime ``no such key`` rather than a compile error).

Complexity: O(D) CEL evaluations per distinct expression per session for D devices; a repeated
expression is one dictionary lookup.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from caldera.models.dra import Device, DeviceAttribute
from caldera.quantity import QuantityError, parse_quantity

__all__ = ["NO_SUCH_KEY_HINT", "Evaluated", "SelectorEngine", "device_input"]

BoolArray = npt.NDArray[np.bool_]
NO_SUCH_KEY_HINT = (
    ". Consider using CEL optional chaining (?), has() macro, or orValue() for optional fields"
)
_QUANTITY = "__k8s_quantity__"
_SEMVER = "__k8s_semver__"
_LITERAL_KEY = re.compile(r'\[\s*"([^"\\]*)"\s*\]')
_SEMVER_TEXT = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)


class CelError(ValueError):
    """An error a CEL function reports (its message is what kube would print)."""


# -- quantities and versions as CEL values -------------------------------------------------------


def _quantity_value(value: Fraction) -> dict[str, str]:
    return {_QUANTITY: f"{value.numerator}/{value.denominator}"}


def _fraction(q: Any) -> Fraction:
    if isinstance(q, dict) and _QUANTITY in q:
        return Fraction(str(q[_QUANTITY]))
    if isinstance(q, int) and not isinstance(q, bool):
        return Fraction(q)
    raise CelError("no such overload")


def _quantity(text: Any) -> dict[str, str]:
    try:
        return _quantity_value(parse_quantity(str(text)))
    except QuantityError as exc:
        raise CelError(str(exc)) from None


def _is_quantity(text: Any) -> bool:
    try:
        parse_quantity(str(text))
    except QuantityError:
        return False
    return True


def _semver_parts(v: Any) -> tuple[int, int, int, tuple[str, ...]]:
    if not (isinstance(v, dict) and _SEMVER in v):
        raise CelError("no such overload")
    match = _SEMVER_TEXT.fullmatch(str(v[_SEMVER]))
    if match is None:
        raise CelError(f"invalid semver {v[_SEMVER]!r}")
    pre = tuple(match.group(4).split(".")) if match.group(4) else ()
    return int(match.group(1)), int(match.group(2)), int(match.group(3)), pre


def _semver(text: Any) -> dict[str, str]:
    value = {_SEMVER: str(text)}
    _semver_parts(value)
    return value


def _is_semver(text: Any) -> bool:
    return _SEMVER_TEXT.fullmatch(str(text)) is not None


def _pre_key(pre: tuple[str, ...]) -> tuple[int, tuple[tuple[int, int | str], ...]]:
    """Semver 2.0 precedence: a release sorts after its pre-releases; numeric identifiers sort
    numerically and before alphanumeric ones."""
    if not pre:
        return (1, ())
    return (0, tuple((0, int(p)) if p.isdigit() else (1, p) for p in pre))


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and _SEMVER in a:
        x, y = _semver_parts(a), _semver_parts(b)
        kx, ky = (x[:3], _pre_key(x[3])), (y[:3], _pre_key(y[3]))
        return (kx > ky) - (kx < ky)
    fa, fb = _fraction(a), _fraction(b)
    if not (isinstance(b, dict) and _QUANTITY in b):
        raise CelError("no such overload")
    return (fa > fb) - (fa < fb)


def _as_integer(q: Any) -> int:
    value = _fraction(q)
    if value.denominator != 1 or not -(2**63) <= value < 2**63:
        raise CelError("cannot convert value to integer")
    return int(value)


def _is_integer(q: Any) -> bool:
    value = _fraction(q)
    return value.denominator == 1 and -(2**63) <= value < 2**63


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": lambda q: (_fraction(q) > 0) - (_fraction(q) < 0),
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: float(_fraction(q)),
    "add": lambda a, b: _quantity_value(_fraction(a) + _fraction(b)),
    "sub": lambda a, b: _quantity_value(_fraction(a) - _fraction(b)),
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "compareTo": _compare,
    "semver": _semver,
    "isSemver": _is_semver,
    "major": lambda v: _semver_parts(v)[0],
    "minor": lambda v: _semver_parts(v)[1],
    "patch": lambda v: _semver_parts(v)[2],
}


# -- device input --------------------------------------------------------------------------------


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute(attr: DeviceAttribute) -> Any:
    if attr.int_ is not None:
        return attr.int_
    if attr.bool_ is not None:
        return attr.bool_
    if attr.string is not None:
        return attr.string
    if attr.version is not None:
        return {_SEMVER: attr.version}
    return None


def device_input(driver: str, device: Device) -> dict[str, Any]:
    """The ``device`` variable for one device, as kube's DeviceMatches builds it."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in device.attributes.items():
        domain, ident = _split(name, driver)
        attributes.setdefault(domain, {})[ident] = _attribute(attr)
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in device.capacity.items():
        domain, ident = _split(name, driver)
        try:
            value = _quantity_value(parse_quantity(cap.value))
        except QuantityError:
            continue
        capacity.setdefault(domain, {})[ident] = value
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": bool(device.allow_multiple_allocations),
    }


# -- evaluation ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evaluated:
    """One expression over every device of the session."""

    matches: BoolArray
    errors: dict[int, str]
    """Device index → ``CEL runtime error`` text (kube's wording after that prefix)."""
    compile_error: str | None = None


def _runtime_error(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else ""
        return f"no such key: {key}{NO_SUCH_KEY_HINT}"
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    text = str(exc)
    if isinstance(exc, TypeError) and text.startswith("No such overload"):
        return "no such overload"
    found = re.search(r"(?:CelError|ValueError): (.*?)(?:\. Check function arguments|$)", text)
    return found.group(1) if found else text


def _type_name(value: Any) -> str:
    names = {str: "string", int: "int", float: "double", bytes: "bytes", list: "list", dict: "map"}
    return "null_type" if value is None else names.get(type(value), type(value).__name__)


class SelectorEngine:
    """Compiles and evaluates selector expressions over a fixed list of devices."""

    def __init__(self, devices: Sequence[dict[str, Any]]) -> None:
        self.devices = list(devices)
        self._domains: set[str] = set()
        for d in self.devices:
            self._domains.update(d["attributes"], d["capacity"])
        for domain in self._domains:
            self._add_domain(domain)
        import cel  # here, not at the top: the package pulls in 0.2 s of imports

        self._context = cel.Context()
        for name, fn in FUNCTIONS.items():
            self._context.add_function(name, fn)
        self._cache: dict[str, Evaluated] = {}

    def _add_domain(self, domain: str) -> None:
        """Unknown domains read as empty maps (kube's mapper with a default value)."""
        self._domains.add(domain)
        for d in self.devices:
            d["attributes"].setdefault(domain, {})
            d["capacity"].setdefault(domain, {})

    def evaluate(self, expression: str) -> Evaluated:
        hit = self._cache.get(expression)
        if hit is not None:
            return hit
        n = len(self.devices)
        import cel  # see __init__

        try:
            program = cel.compile(expression)
        except (ValueError, RuntimeError) as exc:
            hit = Evaluated(np.zeros(n, dtype=bool), {}, f"compilation failed: {exc}")
            self._cache[expression] = hit
            return hit
        for key in _LITERAL_KEY.findall(expression):
            if key not in self._domains:
                self._add_domain(key)
        matches = np.zeros(n, dtype=bool)
        errors: dict[int, str] = {}
        context = self._context
        for i, device in enumerate(self.devices):
            context.add_variable("device", device)
            try:
                result = program.execute(context)
            except Exception as exc:  # noqa: BLE001 - every CEL failure is a verdict, not a crash
                errors[i] = _runtime_error(exc)
                continue
            if isinstance(result, bool):
                matches[i] = result
            else:
                kind = _type_name(result)
                errors[i] = f"CEL result of type {kind} could not be converted to bool"
        hit = self._cache[expression] = Evaluated(matches, errors)
        return hit
