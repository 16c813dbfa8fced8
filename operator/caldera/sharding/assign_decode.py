"""How Volcano's sharding controller reads YAML and flag values, as rules a parser can apply.

The sharding ConfigMap is decoded by ``sigs.k8s.io/yaml`` (``ParseShardingConfig`` in
``pkg/controllers/sharding/config.go``): YAML 1.1 through ``gopkg.in/yaml.v2``, converted to JSON
(``yamlToJSONTarget``, which turns a number or a boolean into a string where the Go field is a
string), then ``encoding/json`` into the Go structs (keys matched case-insensitively, unknown keys
ignored, ``null`` leaving the zero value, a value of the wrong JSON kind refused). The
``--scheduler-configs`` flag is read with ``strconv`` (``parseOldFormat``). This module holds those
rules; :mod:`caldera.sharding.assign_config` applies them to Volcano's fields (``shardSyncPeriod``
with :func:`caldera.framework.duration.parse_go_duration`, ``time.ParseDuration``).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import yaml

__all__ = [
    "ShardingConfigError",
    "go_bool",
    "go_float",
    "go_int",
    "load_yaml",
    "struct_fields",
    "to_bool_ptr",
    "to_float",
    "to_int",
    "to_list",
    "to_map",
    "to_string",
]

_INT64 = 2**63
_JSON_EXPONENT_FROM = 1e21
"""``encoding/json`` writes a float64 at or above this with an exponent, which no Go int reads."""


class ShardingConfigError(ValueError):
    """A sharding configuration Volcano's controller would refuse; ``key`` is the value's path
    (``schedulerConfigs[1].cpuUtilizationMax``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class _Loader(yaml.SafeLoader):
    """``gopkg.in/yaml.v2``'s YAML 1.1 reading where PyYAML's differs: timestamps stay strings
    (they only become times in a ``time.Time`` field), and ``y``/``n`` are booleans too."""

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        return str(self.construct_scalar(node)).lower() in {"y", "yes", "true", "on"}


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))
_Loader.add_constructor("tag:yaml.org,2002:bool", _Loader.construct_yaml_bool)


def load_yaml(text: str | bytes, key: str, prefix: str) -> object:
    """The first YAML document of ``text`` (``yaml.Unmarshal`` reads no further); None when empty.
    A float that is not finite anywhere in it fails, as ``json.Marshal`` does."""
    try:
        documents = yaml.load_all(text, Loader=_Loader)  # a SafeLoader subclass
        document = next(iter(documents), None)
    except yaml.YAMLError as err:
        raise ShardingConfigError(key, f"{prefix}: {err}") from None
    _check_finite(document, key, prefix)
    return document


def _check_finite(value: object, key: str, prefix: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ShardingConfigError(
            key, f"{prefix}: json: unsupported value: {_format_scalar(value)}"
        )
    if isinstance(value, dict):
        for item in value.values():
            _check_finite(item, key, prefix)
    elif isinstance(value, list):
        for item in value:
            _check_finite(item, key, prefix)


def _kind(value: object) -> str:
    """The JSON kind ``encoding/json`` names in its errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string"


def _refuse(value: object, go_type: str, key: str, prefix: str) -> ShardingConfigError:
    return ShardingConfigError(
        key, f"{prefix}: {key}: cannot unmarshal {_kind(value)} into Go value of type {go_type}"
    )


def _key_string(key: object) -> str:
    """``convertToJSONableObject``: a YAML map key as the JSON key it becomes."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        return _format_scalar(key)
    return str(key)


def _format_scalar(value: float) -> str:
    """``strconv.FormatInt`` for an integer, ``FormatFloat(f, 'g', -1, 32)`` for a float."""
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if value == 0:
        return "0"
    digits, _, exponent = np.format_float_scientific(np.float32(value), unique=True).partition("e")
    sign = "-" if digits.startswith("-") else ""
    mantissa = digits.lstrip("-").replace(".", "").rstrip("0") or "0"
    power = int(exponent)
    if power < -4 or power >= 6:  # %e, shortest precision decides at 6
        rest = f".{mantissa[1:]}" if len(mantissa) > 1 else ""
        return f"{sign}{mantissa[0]}{rest}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if power < 0:
        return f"{sign}0.{'0' * (-power - 1)}{mantissa}"
    whole, frac = mantissa[: power + 1].ljust(power + 1, "0"), mantissa[power + 1 :]
    return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}"


def struct_fields(
    value: object, names: tuple[str, ...], key: str, prefix: str, go_type: str
) -> dict[str, object]:
    """The members of a JSON object read into a Go struct with fields ``names``: a key matches
    its field exactly or else ignoring case; keys arrive sorted (``json.Marshal`` of a map), so
    of several keys matching one field the last wins; other keys are ignored."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _refuse(value, go_type, key, prefix)
    exact = set(names)
    folded = {name.lower(): name for name in names}
    out: dict[str, object] = {}
    for raw_key, item in sorted((_key_string(k), v) for k, v in value.items()):
        name = raw_key if raw_key in exact else folded.get(raw_key.lower())
        if name is not None:
            out[name] = item
    return out


def to_string(value: object, key: str, prefix: str) -> str:
    """A Go ``string`` field: a YAML number or boolean is written as its text first."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _format_scalar(value)
    if isinstance(value, str):
        return value
    raise _refuse(value, "string", key, prefix)


def to_float(value: object, key: str, prefix: str) -> float:
    """A Go ``float64`` field."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse(value, "float64", key, prefix)
    return float(value)


def to_int(value: object, key: str, prefix: str) -> int:
    """A Go ``int`` field: an integral number (``2.0`` reaches JSON as ``2``)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse(value, "int", key, prefix)
    if isinstance(value, float) and (not value.is_integer() or abs(value) >= _JSON_EXPONENT_FROM):
        raise ShardingConfigError(
            key, f"{prefix}: {key}: cannot unmarshal number {value} into Go int"
        )
    number = int(value)
    if not -_INT64 <= number < _INT64:
        raise ShardingConfigError(
            key, f"{prefix}: {key}: cannot unmarshal number {value} into Go int"
        )
    return number


def to_bool_ptr(value: object, key: str, prefix: str) -> bool | None:
    """A Go ``*bool`` field (``bool`` when ``None`` is read as false)."""
    if value is None or isinstance(value, bool):
        return value
    raise _refuse(value, "bool", key, prefix)


def to_list(value: object, key: str, prefix: str, go_type: str) -> list[object]:
    """A Go slice field."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _refuse(value, go_type, key, prefix)
    return value


def to_map(value: object, key: str, prefix: str) -> dict[str, Any]:
    """A Go ``map[string]interface{}`` field, keys as JSON strings all the way down."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _refuse(value, "map[string]interface {}", key, prefix)
    return {_key_string(k): _jsonable(v) for k, v in value.items()}


def _jsonable(value: object) -> object:
    if isinstance(value, dict):
        return {_key_string(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


# strconv, for the --scheduler-configs flag.

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+")
_SPECIAL = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf}
_SPECIAL |= {"+infinity": math.inf, "-infinity": -math.inf, "nan": math.nan}
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def go_float(text: str) -> float:
    """``strconv.ParseFloat(text, 64)``; ValueError with its text."""
    special = _SPECIAL.get(text.lower())
    if special is not None:
        return special
    if _DECIMAL.fullmatch(text):
        value = float(text)
    elif _HEX.fullmatch(text):
        value = float.fromhex(text)
    else:
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": invalid syntax')
    if math.isinf(value):
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": value out of range')
    return value


def go_int(text: str) -> int:
    """``strconv.Atoi``; ValueError with its text."""
    if not re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
        raise ValueError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise ValueError(f'strconv.Atoi: parsing "{text}": value out of range')
    return value


def go_bool(text: str) -> bool:
    """``strconv.ParseBool``; ValueError with its text."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')
