"""NVIDIA cards the HAMi way: the node registration, the pod's requests, the allocation string.

Exactly what HAMi's device plugin writes and reads (../shared/reference/hami.md §1–§3), so that
HAMi's device plugin and HAMi-core keep working unchanged with Caldera as the scheduler:

- the registration ``hami.io/node-nvidia-register`` in its current JSON form (Go's decoder:
  keys matched case-insensitively, unknown keys ignored, a missing ``health`` means unhealthy)
  and its legacy colon form (7 or 9 fields per card);
- the pair scores ``hami.io/node-nvidia-score`` and the per-card cordon ``hami.io/device-cordon``;
- a container's request from ``nvidia.com/gpu``, ``gpumem``, ``gpumem-percentage`` and
  ``gpucores`` (limits first, then requests; the whole-card rule; an invalid memory empties the
  request), init containers first;
- the allocation string ``<uuid>,NVIDIA,<mem>,<cores>:`` per card and ``;`` per container, every
  container present (aligned with the pod's containers, init containers first);
- the pod's say in where its cards come from: model and UUID selectors, vGPU mode, NUMA binding,
  GPU and node policy overrides, scoring weights.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from caldera.devices.fit import FitOptions
from caldera.devices.model import (
    UNSET_PERCENTAGE,
    Card,
    CardRequest,
    DeviceDefaults,
    Grant,
    RegistrationError,
)
from caldera.devices.vendor import HAMI_KEYS, Vendor

__all__ = [
    "CORDON_ANNOTATION",
    "NVIDIA",
    "REGISTER_ANNOTATION",
    "RESOURCES",
    "SCORE_ANNOTATION",
    "VENDOR",
    "container_request",
    "cordoned",
    "decode_allocation",
    "encode_allocation",
    "node_policy",
    "pair_scores",
    "pod_options",
    "registered_cards",
    "scoring_weights",
]

VENDOR = "NVIDIA"
REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
SCORE_ANNOTATION = "hami.io/node-nvidia-score"
CORDON_ANNOTATION = "hami.io/device-cordon"
COUNT, MEMORY, MEMORY_PERCENTAGE, CORES = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
)
RESOURCES = frozenset({COUNT, MEMORY, MEMORY_PERCENTAGE, CORES, "nvidia.com/priority"})
"""Kept out of the generic resource fit: nodes never advertise them (HAMi marks them ignored)."""

_FIELDS = ("id", "index", "count", "devmem", "devcore", "type", "numa", "mode", "health")


def registered_cards(text: str) -> list[Card]:
    """The cards a node registers (JSON, or the legacy colon form); ``[]``: no GPU on the node."""
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        return _from_json(stripped)
    return _from_colons(stripped)


def _from_json(text: str) -> list[Card]:
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
        fields = {key.lower(): value for key, value in item.items() if key.lower() in _FIELDS}
        cards.append(_card(fields, f"[{i}]"))
    return cards


def _card(fields: Mapping[str, Any], where: str) -> Card:
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


_GO_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def _from_colons(text: str) -> list[Card]:
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
            fields[name] = _int(raw, f"device {i} {name}")
        if parts[6] not in _GO_BOOLS:
            raise RegistrationError(f"device {i} health: expected true or false, not {parts[6]!r}")
        fields["health"] = _GO_BOOLS[parts[6]]
        if len(parts) == 9:
            fields["index"] = _int(parts[7], f"device {i} index")
            fields["mode"] = parts[8]
        cards.append(_card(fields, f"device {i}"))
    return cards


def _int(raw: str, where: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise RegistrationError(f"{where}: not an integer: {raw!r}") from None


def pair_scores(text: str) -> dict[str, dict[str, int]]:
    """``hami.io/node-nvidia-score``: per card, its link score to each other card."""
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise RegistrationError(f"{SCORE_ANNOTATION}: not valid JSON: {exc}") from None
    out: dict[str, dict[str, int]] = {}
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("uuid"), str):
            scores = item.get("score") or {}
            out[item["uuid"]] = {
                str(k): int(v)
                for k, v in scores.items()
                if isinstance(v, int) and not isinstance(v, bool)
            }
    return out


def cordoned(annotations: Mapping[str, str]) -> frozenset[str]:
    """The cards a node's operator took out of new allocations (comma-separated UUIDs)."""
    raw = annotations.get(CORDON_ANNOTATION, "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


_DEFAULTS = DeviceDefaults()


def _named(name: str, limits: Mapping[str, float], requests: Mapping[str, float]) -> float | None:
    if name in limits:
        return limits[name]
    return requests.get(name)


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = _DEFAULTS,
) -> CardRequest | None:
    """What a container asks of each card, or None (no ``nvidia.com/gpu``, or a memory that is
    not a whole non-negative number, which empties the request as HAMi does)."""
    nums = _named(COUNT, limits, requests)
    if nums is None or nums <= 0:
        return None
    memory = _named(MEMORY, limits, requests)
    memreq = 0
    if memory is not None:
        if memory < 0 or memory != int(memory):
            return None
        memreq = int(memory) * defaults.memory_factor
    percentage = UNSET_PERCENTAGE
    given = _named(MEMORY_PERCENTAGE, limits, requests)
    if given is not None and given > 0:
        percentage = min(int(given), 100)
    if percentage == UNSET_PERCENTAGE and memreq == 0:
        if defaults.default_memory:
            memreq = defaults.default_memory
        else:
            percentage = 100  # the whole card
    cores = _named(CORES, limits, requests)
    return CardRequest(
        vendor=VENDOR,
        nums=int(nums),
        memreq=memreq,
        mem_percentage=percentage,
        coresreq=int(cores) if cores is not None else defaults.default_cores,
    )


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


USE_TYPE, NOUSE_TYPE = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
USE_UUID, NOUSE_UUID = "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid"
VGPU_MODE, NUMA_BIND = "nvidia.com/vgpu-mode", "nvidia.com/numa-bind"
NODE_POLICY, GPU_POLICY = "hami.io/node-scheduler-policy", "hami.io/gpu-scheduler-policy"
SCORING_WEIGHTS = "hami.io/device-scoring-weights"


def _list(raw: str | None) -> tuple[str, ...]:
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


def pod_options(
    annotations: Mapping[str, str], *, gpu_policy: str, cordon: frozenset[str] = frozenset()
) -> FitOptions:
    """What a pod's annotations say about the cards it may get (``gpu_policy``: the scheduler's
    default, which the pod's ``hami.io/gpu-scheduler-policy`` overrides)."""
    if _OPTION_KEYS.isdisjoint(annotations):
        return _plain_options(gpu_policy, cordon)  # the common case: the pod says nothing
    weights = annotations.get(SCORING_WEIGHTS)
    return FitOptions(
        gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
        numa_bind=_GO_BOOLS.get(annotations.get(NUMA_BIND, "").strip(), False),
        use_types=_list(annotations.get(USE_TYPE)),
        nouse_types=_list(annotations.get(NOUSE_TYPE)),
        vgpu_mode=annotations.get(VGPU_MODE),
        use_uuids=frozenset(_list(annotations.get(USE_UUID))),
        nouse_uuids=frozenset(_list(annotations.get(NOUSE_UUID))),
        cordoned=cordon,
        weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
    )


_OPTION_KEYS = frozenset(
    {GPU_POLICY, NUMA_BIND, USE_TYPE, NOUSE_TYPE, VGPU_MODE, USE_UUID, NOUSE_UUID, SCORING_WEIGHTS}
)


@functools.lru_cache(maxsize=64)
def _plain_options(gpu_policy: str, cordon: frozenset[str]) -> FitOptions:
    return FitOptions(gpu_policy=gpu_policy, cordoned=cordon)


def node_policy(annotations: Mapping[str, str], default: str) -> str:
    """``binpack`` or ``spread`` for choosing among nodes (the pod's annotation wins)."""
    return annotations.get(NODE_POLICY) or default


def _options(annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str]) -> FitOptions:
    return pod_options(annotations, gpu_policy=gpu_policy, cordon=cordon)


NVIDIA = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=RESOURCES,
    quota_memory=MEMORY,
    quota_cores=CORES,
    keys=HAMI_KEYS,
    count_resource=COUNT,
    read_cards=registered_cards,
    read_request=container_request,
    read_options=_options,
    encode=encode_allocation,
    decode=decode_allocation,
    score_annotation=SCORE_ANNOTATION,
    read_pair_scores=pair_scores,
    cordon_annotation=CORDON_ANNOTATION,
)
"""HAMi's NVIDIA dialect."""
