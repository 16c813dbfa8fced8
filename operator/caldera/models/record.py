"""Slim records for the kinds read by the tens of thousands: pods, nodes and what they hold.

A 50,000-pod cluster keeps 50,000 pods in memory, decoded from every watch event. As pydantic
models each real pod cost about 11 KB and 99 µs to validate; as msgspec structs, decoded from the
JSON field by field, 4 KB and 18 µs (``benchmarks/pod_decode.py``, docs/operator.md). So the
core kinds (``models/core.py``), their metadata and label selectors are :class:`Record` types;
pydantic stays where its messages are the product (Volcano's CRDs, policies, webhooks, plugin
arguments).

A record is frozen and not tracked by the garbage collector (it holds no cycles), decodes with the
same rules as the pydantic models (camelCase keys, unknown keys ignored, constraints checked), and
answers the calls both kinds of model share here — ``model_validate``, ``model_validate_json``,
``model_copy(update=...)`` — so the cache, the parser and the simulator treat every kind alike. A
pydantic model may hold a record as a field: it is validated by msgspec there too.

Quantities are converted on decode by :data:`DECODE_HOOKS` (the field type :class:`Quantities`)
and times by the record's ``__post_init__`` (:data:`Time`, :func:`settle_times`), as the pydantic
models' ``ResourceList`` and ``Timestamp`` do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Self, TypeAlias

import msgspec
import msgspec.inspect
from pydantic_core import core_schema

from caldera.quantity import QuantityError, to_engine_units

__all__ = [
    "DECODE_HOOKS",
    "Quantities",
    "Record",
    "RecordError",
    "Time",
    "error_text",
    "settle_times",
    "timestamp",
]

RecordError = msgspec.ValidationError
"""What decoding a malformed record raises."""


class Quantities(dict[str, float]):
    """A Kubernetes ResourceList in engine units (cpu millicores, other resources whole)."""


if TYPE_CHECKING:
    Time: TypeAlias = float | None
else:
    Time = float | str | None
"""A time as seconds since the epoch, None when absent. It is decoded as the RFC 3339 string the
API sends and converted by :func:`settle_times` before anyone reads it (a decode hook cannot give
None for an empty string)."""


def timestamp(value: object) -> float | None:
    """Seconds since the epoch from an RFC 3339 string (UTC when no zone is given) or a number;
    None for an absent time."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, datetime):
        stamp = value
    elif isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"invalid RFC 3339 time {value!r}") from None
    else:
        raise ValueError(f"invalid time {value!r}")  # noqa: TRY004
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def quantities(value: object) -> dict[str, float]:
    """A ResourceList's quantities in engine units; a bad one is named in the error."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError("expected a map of resource name to quantity")  # noqa: TRY004
    out: dict[str, float] = {}
    for name, quantity in value.items():
        try:
            out[str(name)] = to_engine_units(str(name), quantity)
        except QuantityError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return out


def settle_times(record: Record, *names: str) -> None:
    """Convert the :data:`Time` fields ``names`` of a just-decoded ``record`` to seconds."""
    for name in names:
        value = getattr(record, name)
        if isinstance(value, str):
            try:
                seconds = timestamp(value)
            except ValueError as exc:
                field = record.__struct_encode_fields__[record.__struct_fields__.index(name)]
                raise ValueError(f"{field}: {exc}") from None
            msgspec.structs.force_setattr(record, name, seconds)


DECODE_HOOKS: dict[type, Callable[[object], object]] = {
    Quantities: lambda value: Quantities(quantities(value)),
}
"""How a field of each custom type is made from its JSON value."""


def _decode_hook(kind: type, value: Any) -> Any:
    convert = DECODE_HOOKS.get(kind)
    if convert is None:
        raise NotImplementedError(f"no decoder for {kind.__name__}")
    return convert(value)


_AT = re.compile(r"^(?P<message>.*) - at `\$(?P<path>[^`]*)`$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]*)`$")


def error_text(exc: msgspec.ValidationError, kind: type[Record] | None = None) -> str:
    """msgspec's message as the parser words pydantic's: ``spec.containers[0].name: Expected
    `str` of length >= 1``; with the record's ``kind``, a value not among a field's choices is
    followed by them."""
    found = _AT.match(str(exc))
    path, message = (found["path"].removeprefix("."), found["message"]) if found else ("", str(exc))
    missing = _MISSING.match(message)
    if missing is not None:  # named where it is missing, as pydantic does
        path, message = ".".join(p for p in (path, missing["field"]) if p), "Field required"
    if kind is not None and message.startswith("Invalid enum value"):
        choices = _choices(kind, path)
        if choices:
            message += f" (expected {' or '.join(repr(c) for c in choices)})"
    return f"{path}: {message}" if path else message


_STEP = re.compile(r"\.?([^.\[]+)|\[\d+\]")


def _choices(kind: type[Record], path: str) -> tuple[object, ...]:
    """The values a Literal field at ``path`` (``spec.taints[0].effect``) of ``kind`` takes."""
    info: Any = msgspec.inspect.type_info(kind)
    for step in _STEP.finditer(path):
        while isinstance(info, msgspec.inspect.UnionType):  # an optional field
            info = next(t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
        if step[1] is None:  # an index: the item type
            info = getattr(info, "item_type", None)
        elif isinstance(info, msgspec.inspect.StructType):
            info = next((f.type for f in info.fields if f.encode_name == step[1]), None)
        else:
            return ()
    while isinstance(info, msgspec.inspect.UnionType):
        info = next(t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
    return tuple(info.values) if isinstance(info, msgspec.inspect.LiteralType) else ()


class Record(
    msgspec.Struct, rename="camel", kw_only=True, frozen=True, gc=False, omit_defaults=True
):
    """Base of the slim kinds: camelCase keys, unknown keys ignored, immutable. (msgspec does not
    pass ``kw_only`` on, and mypy does not pass ``frozen`` on: each record class states both.)"""

    @classmethod
    def model_validate(cls, data: object) -> Self:
        """``data`` (a dict of the object's JSON) checked and converted; raises
        :data:`RecordError`."""
        return msgspec.convert(data, cls, dec_hook=_decode_hook)

    @classmethod
    def model_validate_json(cls, raw: bytes | memoryview | str) -> Self:
        record: Self = _decoder(cls).decode(raw)
        return record

    def model_copy(self, *, update: Mapping[str, Any]) -> Self:
        """This record with some fields replaced (not checked again, as pydantic's copy)."""
        return msgspec.structs.replace(self, **update)

    def model_dump(self) -> dict[str, Any]:
        """The record as the API writes it: camelCase keys, fields left at their default left
        out, quantities in engine units."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out

    @classmethod
    def __get_pydantic_core_schema__(cls, source: object, handler: object) -> Any:
        """How a pydantic model holding this record validates it: by msgspec, its error worded
        as :func:`error_text` words it."""

        def validate(value: object) -> object:
            if isinstance(value, cls):
                return value
            try:
                return cls.model_validate(value)
            except msgspec.ValidationError as exc:
                raise ValueError(error_text(exc, cls)) from None

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(msgspec.to_builtins),
        )


@cache
def _decoder(kind: type[Record]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(kind, dec_hook=_decode_hook)
