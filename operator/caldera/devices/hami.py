"""HAMi's device protocol as every vendor shares it: registrations, allocations, pod options.

Vendor modules (:mod:`caldera.devices.nvidia`, :mod:`~caldera.devices.hygon`,
:mod:`~caldera.devices.volcano_vgpu`) name their own annotations and resources and build on these:

- a node registration: HAMi's JSON (Go's decoder: keys matched case-insensitively, unknown keys
  ignored, a missing ``health`` means unhealthy) or the legacy colon form (7 or 9 fields a card);
- the allocation string ``<uuid>,<vendor>,<mem>,<cores>:`` per card and ``;`` per container,
  every container present (init containers first);
- resource values read from limits first, then requests; comma lists; Go's boolean words;
- the pod annotations every vendor honours: GPU and node policy, scoring weights; the per-card
  cordon ``hami.io/device-cordon``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from caldera.devices.fit import FitOptions
from caldera.devices.model import Card, DeviceDefaults, Grant, RegistrationError

__all__ = [
    "CORDON_ANNOTATION",
    "DEFAULTS",
    "GO_BOOLS",
    "GPU_POLICY",
    "INT32_MAX",
    "NODE_POLICY",
    "SCORING_WEIGHTS",
    "as_int64",
    "card_index",
    "card_of",
    "comma_list",
    "cordoned",
    "decode_allocation",
    "encode_allocation",
    "from_colons",
    "from_json",
    "go_int",
    "go_int32",
    "named",
    "node_policy",
    "registered_cards",
    "scoring_weights",
    "uuid_options",
]

NODE_POLICY, GPU_POLICY = "hami.io/node-scheduler-policy", "hami.io/gpu-scheduler-policy"

CORDON_ANNOTATION = "hami.io/device-cordon"


_FIELDS = ("id", "index", "count", "devmem", "devcore", "type", "numa", "mode", "health")


def registered_cards(
    text: str, more: Callable[[Card, Mapping[str, Any]], Card] | None = None
) -> list[Card]:
    """The cards a node registers (JSON, or the legacy colon form); ``[]``: no GPU on the node.
    ``more`` reads a vendor's extra keys of the JSON form (:func:`from_json`)."""
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        return from_json(stripped, more)
    return from_colons(stripped)


def from_json(
    text: str, more: Callable[[Card, Mapping[str, Any]], Card] | None = None
) -> list[Card]:
    """HAMi's JSON registration (``UnMarshalNodeDevices``); ``more`` reads what a vendor keeps
    beyond the common fields from each device's keys (lower-cased)."""
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise RegistrationError(f"not valid JSON: {exc}") from None
    if not isinstance(items, list):
        raise RegistrationError("expected a JSON array of devices")
    cards = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise RegistrationError(f"[{i}]: expected an object")
        # Go's encoding/json matches keys case-insensitively (the last match wins)
        fields = {key.lower(): value for key, value in item.items()}
        card = card_of({k: v for k, v in fields.items() if k in _FIELDS}, f"[{i}]")
        cards.append(card if more is None else more(card, fields))
    return cards


def card_of(fields: Mapping[str, Any], where: str) -> Card:
    def integer(name: str, *, unsigned: bool = False) -> int:
        value = fields.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or (unsigned and value < 0):
            raise RegistrationError(f"{where}.{name}: expected an integer, got {value!r}")
        return value

    def text(name: str) -> str:
        value = fields.get(name, "")
        if not isinstance(value, str):
            raise RegistrationError(f"{where}.{name}: expected a string, got {value!r}")
        return value

    health = fields.get("health", False)
    if not isinstance(health, bool):
        raise RegistrationError(f"{where}.health: expected true or false, got {health!r}")
    return Card(
        id=text("id"),
        index=integer("index", unsigned=True),
        count=integer("count"),
        devmem=integer("devmem"),
        devcore=integer("devcore"),
        type=text("type"),
        numa=integer("numa"),
        mode=text("mode"),
        health=health,
    )


GO_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def from_colons(text: str) -> list[Card]:
    """``id,count,devmem,devcore,type,numa,health[,index,mode]:`` per card."""
    cards = []
    for i, entry in enumerate(e for e in text.split(":") if e.strip()):
        parts = entry.split(",")
        if len(parts) not in (7, 9):
            raise RegistrationError(
                f"device {i}: expected 7 or 9 comma-separated fields, not {len(parts)}"
            )
        fields: dict[str, Any] = {"id": parts[0], "type": parts[4], "mode": "hami-core"}
        for name, raw in (
            ("count", parts[1]),
            ("devmem", parts[2]),
            ("devcore", parts[3]),
            ("numa", parts[5]),
        ):
            fields[name] = go_int(raw, f"device {i} {name}")
        if parts[6] not in GO_BOOLS:
            raise RegistrationError(f"device {i} health: expected true or false, not {parts[6]!r}")
        fields["health"] = GO_BOOLS[parts[6]]
        if len(parts) == 9:
            fields["index"] = go_int(parts[7], f"device {i} index")
            fields["mode"] = parts[8]
        cards.append(card_of(fields, f"device {i}"))
    return cards


def go_int(raw: str, where: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise RegistrationError(f"{where}: not an integer: {raw!r}") from None


def cordoned(annotations: Mapping[str, str], key: str = CORDON_ANNOTATION) -> frozenset[str]:
    """The cards a node's operator took out of new allocations (comma-separated UUIDs)."""
    raw = annotations.get(key, "")
    if not raw:
        return frozenset()
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


DEFAULTS = DeviceDefaults()


def named(name: str, limits: Mapping[str, float], requests: Mapping[str, float]) -> float | None:
    if name in limits:
        return limits[name]
    return requests.get(name)


def encode_allocation(containers: Sequence[Sequence[Grant]]) -> str:
    """The allocation string, one entry per container (init containers first), empty ones too."""
    return "".join(
        "".join(f"{g.uuid},{g.vendor},{g.memory},{g.cores}:" for g in grants) + ";"
        for grants in containers
    )


_INT32 = range(-(2**31), 2**31)


def decode_allocation(text: str) -> list[list[Grant]]:
    """The grants per container of an allocation string (empty containers kept, so the index still
    maps to a container)."""
    pieces = text.split(";")
    if pieces and pieces[-1] == "":
        pieces.pop()
    out: list[list[Grant]] = []
    for piece in pieces:
        grants = []
        for entry in piece.split(":"):
            if "," not in entry:
                continue
            fields = entry.split(",")
            if len(fields) < 4:
                raise ValueError(f"allocation entry {entry!r}: expected uuid,vendor,memory,cores")
            try:
                memory, cores = int(fields[2]), int(fields[3])
            except ValueError:
                raise ValueError(
                    f"allocation entry {entry!r}: memory and cores must be integers"
                ) from None
            if memory not in _INT32 or cores not in _INT32:
                raise ValueError(f"allocation entry {entry!r}: out of range")
            grants.append(Grant(fields[0], fields[1], memory, cores))
        out.append(grants)
    return out


SCORING_WEIGHTS = "hami.io/device-scoring-weights"


def comma_list(raw: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (raw or "").split(",") if part.strip())


def scoring_weights(raw: str) -> tuple[int, int, int]:
    """``slot=1,core=1,memory=3``: all three keys, non-negative integers, at least one positive
    (an invalid value fails the pod, as in HAMi)."""
    values: dict[str, int] = {}
    for part in raw.split(","):
        key, sep, number = part.partition("=")
        key = key.strip()
        if not sep or key not in ("slot", "core", "memory") or key in values:
            raise ValueError(f"{SCORING_WEIGHTS}: expected slot=N,core=N,memory=N, not {raw!r}")
        try:
            values[key] = int(number.strip())
        except ValueError:
            raise ValueError(f"{SCORING_WEIGHTS}: {key} is not an integer: {number!r}") from None
        if values[key] < 0:
            raise ValueError(f"{SCORING_WEIGHTS}: {key} must not be negative")
    if len(values) != 3:
        raise ValueError(f"{SCORING_WEIGHTS}: name slot, core and memory, not {raw!r}")
    if not any(values.values()):
        raise ValueError(f"{SCORING_WEIGHTS}: at least one weight must be positive")
    return values["slot"], values["core"], values["memory"]


def node_policy(annotations: Mapping[str, str], default: str) -> str:
    """``binpack`` or ``spread`` for choosing among nodes (the pod's annotation wins)."""
    return annotations.get(NODE_POLICY) or default


INT32_MAX = 2**31 - 1
"""Go's ``math.MaxInt32``: where HAMi's requests and registrations stop."""


def as_int64(value: float) -> int | None:
    """Go's ``Quantity.AsInt64``: the value when it is a whole number in int64 range, else None
    (the ``ok`` HAMi's and Volcano's callers check, or ignore and read 0)."""
    if not math.isfinite(value) or value != int(value):
        return None
    whole = int(value)
    return whole if -(2**63) <= whole < 2**63 else None


def go_int32(value: int) -> int:
    """Go's ``int32(v)`` of an int64: the low 32 bits, signed (HAMi converts without a check)."""
    return (value + 2**31) % 2**32 - 2**31


def card_index(uuid: str) -> int:
    """The index a vendor that names its cards ``<node>-<word>-<i>`` gives a card (its last
    part; 0 when that is not a number)."""
    tail = uuid.rpartition("-")[2]
    return int(tail) if tail.isdigit() else 0


def uuid_options(
    use_uuid: str, nouse_uuid: str
) -> Callable[[Mapping[str, str], str, frozenset[str]], FitOptions]:
    """The fit options of a vendor whose pods say only which cards (``CheckUUID`` on
    ``use_uuid``/``nouse_uuid``), besides HAMi's generic GPU policy and scoring weights: no type
    selector, NUMA binding or cordon (only NVIDIA's ``Fit`` reads ``hami.io/device-cordon``)."""

    def pod_options(
        annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
    ) -> FitOptions:
        del cordon
        weights = annotations.get(SCORING_WEIGHTS)
        return FitOptions(
            gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
            use_uuids=frozenset(comma_list(annotations.get(use_uuid))),
            nouse_uuids=frozenset(comma_list(annotations.get(nouse_uuid))),
            weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
        )

    return pod_options
