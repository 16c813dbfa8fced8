"""Enflame GCUs shared by DRS profiles, the HAMi way (HAMi's ``pkg/device/enflame/device.go``).

Enflame's DRS device plugin cuts a GCU into hard partitions of a fixed menu (``1g.6gb``,
``3g.20gb``, ``6g.40gb``: slices and GiB), and HAMi's scheduler picks the profile and the GCU
(:mod:`caldera.devices.enflame_drs`). This module is the dialect around that choice, after
HAMi's master with PR #2877 (the slices kept in the allocation string) and the fix of HAMi
issue #3016 (``config_test.go``); the local snapshot (2026-08-21) predates both:

- the cards (``GetNodeDevices``): the node annotation ``enflame.com/gcu-drs-capacity``, JSON
  ``{"devices": [{"index", "minor", "capacity"}], "profiles": {name: id}}``; one GCU per
  device, ``<node>-enflame-drs-<index>``, ``capacity`` slices, 100 % compute and the memory of
  the largest profile; no valid profile, a capacity that is not a positive number, or no
  device is an error. HAMi reads nothing else of the node; Caldera needs the node's name for
  the ids, so it reads the annotation of a node advertising ``enflame.com/drs-gcu`` (the
  kubelet admits DRS pods against it, so a DRS node does);
- the request (``GenerateResourceRequests``): ``enflame.com/drs-gcu: n`` asks the ``n``-slice
  profile; otherwise ``enflame.com/gcu-memory`` (MiB, or GiB when small) and
  ``enflame.com/gcu-core`` (0-100) ask the smallest profile holding both. These are the chart's
  names (``enflameResourceNameDRSGCU``...); ``enflame.com/vgcu`` is the DRS name only for a
  device ConfigMap that sets ``resourceNameVGCU`` and no DRS name, and other ConfigMaps are not
  read yet;
- the pod's say: ``enflame.com/use-gpuuuid``/``nouse-gpuuuid``, HAMi's GPU policy (``mutex``)
  and scoring weights; no cordon (HAMi PR #2926 adding one to every vendor was closed), no
  quota (Enflame's ``Fit`` checks none);
- the bind (``PatchAnnotations``): the allocation on ``hami.io/enflame-vgpu-devices-allocated``
  (a fifth field, the slices, when more than one), ``enflame.com/gcu-assigned: "false"``, the
  time in nanoseconds, the first GCU's index (``-assigned-index`` and ``-assigned-id``) and
  minor, the first profile's slices (``gcu-request-size``) and ``assigned-containers``; no node
  lock (``LockNode`` takes none). The card score is 0 (``ScoreNode``).

A GCU's usage counts each instance's slices (``DrsGrant.slots_taken``), and only this module's
walk judges a node (``screened=False``), so its reasons are HAMi's (``ModeNotFit`` first).
``assigned-containers`` names the pod's containers as the bind gives them (init containers
first).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from caldera.devices.enflame_drs import (
    INT32_MAX,
    INT32_MIN,
    MODE_BY_SPEC,
    VENDOR,
    DrsCard,
    DrsGrant,
    atoi,
    clamp32,
    drs_request,
    drs_walk,
    int32,
    parse_profile,
    slots_of,
)
from caldera.devices.fit import FitOptions
from caldera.devices.hami import (
    DEFAULTS,
    as_int64,
    decode_allocation,
    named,
    uuid_options,
)
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import HAMI_KEYS, NO_LABELS, BindPod, Vendor, no_annotation_cards

__all__ = [
    "ALLOCATED",
    "CAPACITY_ANNOTATION",
    "CORES",
    "DRS_COUNT",
    "ENFLAME",
    "FAMILY",
    "KEYS",
    "MEMORY",
    "capacity_cards",
    "container_request",
    "decode",
    "drs_annotations",
    "encode",
    "parse_capacity",
    "pod_options",
]

FAMILY = "enflame"
DRS_COUNT, MEMORY, CORES = "enflame.com/drs-gcu", "enflame.com/gcu-memory", "enflame.com/gcu-core"
CAPACITY_ANNOTATION = "enflame.com/gcu-drs-capacity"
USE_UUID, NOUSE_UUID = "enflame.com/use-gpuuuid", "enflame.com/nouse-gpuuuid"
ALLOCATED = "hami.io/enflame-vgpu-devices-allocated"
ASSIGNED, ASSIGNED_TIME = "enflame.com/gcu-assigned", "enflame.com/gcu-assigned-time"
ASSIGNED_INDEX, ASSIGNED_ID = "enflame.com/gcu-assigned-index", "enflame.com/gcu-assigned-id"
ASSIGNED_MINOR, REQUEST_SIZE = "enflame.com/gcu-assigned-minor", "enflame.com/gcu-request-size"
ASSIGNED_CONTAINERS = "assigned-containers"
KEYS = dataclasses.replace(HAMI_KEYS, to_allocate=ALLOCATED, allocated=ALLOCATED, lock="")
"""Enflame's ``PatchAnnotations`` writes no to-allocate key: both name the allocated one."""
WHOLE_COMPUTE = 100
"""Every DRS GCU's ``Devcore``."""


# -- registration (GetNodeDevices) -------------------------------------------------------------


def parse_capacity(raw: object) -> int | None:
    """``parseDRSCapacity``: a JSON number in int32 range (truncated) or a decimal string
    (clamped to int32); None for anything else."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        if math.isnan(raw) or not INT32_MIN <= raw <= INT32_MAX:  # ±Inf: out of range
            return None
        return int(raw)
    if isinstance(raw, str):
        value = atoi(raw.strip())
        return None if value is None else clamp32(value)
    return None


def _unreadable(why: str) -> RegistrationError:
    return RegistrationError(f"failed to parse {CAPACITY_ANNOTATION}: {why}")


def _folded(item: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON object's keys as Go's decoder matches struct fields: case-insensitively, the
    last match winning."""
    return {key.lower(): value for key, value in item.items()}


def _text(fields: Mapping[str, Any], key: str, where: str) -> str:
    value = fields.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _unreadable(f"{where}.{key}: expected a string, got {value!r}")
    return value


def _capacity_spec(raw: str) -> tuple[list[tuple[str, str, object]], dict[str, str]]:
    """The annotation's devices, as (index, minor, capacity), and its profiles (``drsCapacity
    Spec``, read as Go's ``json.Unmarshal`` reads it)."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise _unreadable(str(exc)) from None
    if doc is None:
        return [], {}
    if not isinstance(doc, dict):
        raise _unreadable("expected a JSON object")
    fields = _folded(doc)
    profiles: dict[str, str] = {}
    given = fields.get("profiles")
    if given is not None:
        if not isinstance(given, dict):
            raise _unreadable("profiles: expected an object")
        for name, profile_id in given.items():
            if profile_id is not None and not isinstance(profile_id, str):
                raise _unreadable(f"profiles[{name!r}]: expected a string, got {profile_id!r}")
            profiles[name] = profile_id or ""
    devices: list[tuple[str, str, object]] = []
    listed = fields.get("devices")
    if listed is not None:
        if not isinstance(listed, list):
            raise _unreadable("devices: expected an array")
        for i, item in enumerate(listed):
            if item is not None and not isinstance(item, dict):
                raise _unreadable(f"devices[{i}]: expected an object")
            device = _folded(item or {})
            where = f"devices[{i}]"
            devices.append(
                (
                    _text(device, "index", where),
                    _text(device, "minor", where),
                    device.get("capacity"),
                )
            )
    return devices, profiles


def capacity_cards(
    node: str,
    annotations: Mapping[str, str],
    capacity: Mapping[str, float],
    labels: Mapping[str, str] = NO_LABELS,
) -> list[Card]:
    """``GetNodeDevices``: one GCU per device of ``enflame.com/gcu-drs-capacity``, each with
    the memory of the largest profile (GiB × 1024) and the node's whole profile menu."""
    del labels  # no node label decides these cards
    del capacity  # it only says the node runs the DRS device plugin
    raw = annotations.get(CAPACITY_ANNOTATION)
    if raw is None:
        raise RegistrationError(f"annotation not found {CAPACITY_ANNOTATION}")
    devices, profiles = _capacity_spec(raw)
    parsed = [parse_profile(name) for name in profiles]
    max_slice = max((size for size, _ in parsed), default=0)
    max_memory = max((memory for _, memory in parsed), default=0)
    if max_slice <= 0:
        raise RegistrationError(f"no valid drs profiles found on node {node}")
    if max_memory <= 0:
        max_memory = max_slice
    cards: list[Card] = []
    for position, (index_text, minor_text, raw_capacity) in enumerate(devices):
        index = atoi(index_text)
        if index is None:
            index = position
        count = parse_capacity(raw_capacity)
        if count is None or count <= 0:
            raise RegistrationError(f"invalid drs capacity on node {node}")
        cards.append(
            DrsCard(
                id=f"{node}-enflame-drs-{index}",
                count=count,
                devmem=int32(max_memory * 1024),
                devcore=WHOLE_COMPUTE,
                type=VENDOR,
                health=True,
                index=index,
                minor=minor_text.strip() or str(index),
                profiles=tuple(profiles.items()),
                max_slice=max_slice,
            )
        )
    if not cards:
        raise RegistrationError(f"no drs devices found on node {node}")
    return cards


# -- the request (GenerateResourceRequests) ----------------------------------------------------


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """``GenerateResourceRequests``: the ``n``-slice profile (``drs-gcu``: a positive whole
    number; above 2^31-1: nothing), or else a profile by memory and cores (a value that is not
    a whole number reads as -1, no constraint; memory above 2^31-1 or cores outside 0-100:
    nothing). ``defaults`` play no part: Enflame has no default memory, cores or factor."""
    del defaults
    count = named(DRS_COUNT, limits, requests)
    slices = None if count is None else as_int64(count)
    if slices is not None and slices > 0:
        return None if slices > INT32_MAX else drs_request(slices)
    memory, cores = named(MEMORY, limits, requests), named(CORES, limits, requests)
    if memory is None and cores is None:
        return None
    memreq = 0 if memory is None else _value(memory)
    corereq = 0 if cores is None else _value(cores)
    if memreq > INT32_MAX or not 0 <= corereq <= 100:
        return None
    return drs_request(int32(memreq), MODE_BY_SPEC, corereq)


def _value(quantity: float) -> int:
    """``getContainerResourceRequest``'s value: -1 for one that is not a whole number."""
    value = as_int64(quantity)
    return -1 if value is None else value


pod_options = uuid_options(USE_UUID, NOUSE_UUID)
"""The UUID selectors (``CheckUUID``), HAMi's generic GPU policy and scoring weights."""


# -- the allocation string and the bind (PatchAnnotations) -------------------------------------


def encode(containers: Sequence[Sequence[Grant]]) -> str:
    """``EncodePodSingleDevice`` since PR #2877: ``uuid,type,mem,cores[,slots]:`` per GCU, the
    slices written only when more than one; ``;`` per container."""

    def entry(g: Grant) -> str:
        slots = g.slots if isinstance(g, DrsGrant) else 0
        tail = f",{slots}" if slots > 1 else ""
        return f"{g.uuid},{g.vendor},{g.memory},{g.cores}{tail}:"

    return "".join("".join(entry(g) for g in grants) + ";" for grants in containers)


def decode(text: str) -> list[list[Grant]]:
    """``DecodePodSingleDevice`` since PR #2877: a fifth field is the slices (one that is not
    a non-negative int32 is ignored, as HAMi ignores it)."""
    containers = decode_allocation(text)
    pieces = text.split(";")
    if pieces and pieces[-1] == "":
        pieces.pop()
    out: list[list[Grant]] = []
    for piece, grants in zip(pieces, containers, strict=True):
        entries = [e.split(",") for e in piece.split(":") if "," in e]
        kept: list[Grant] = []
        for fields, g in zip(entries, grants, strict=True):
            slots = atoi(fields[4]) if len(fields) >= 5 else None
            if slots is not None and 0 <= slots <= INT32_MAX:
                g = DrsGrant(g.uuid, g.vendor, g.memory, g.cores, slots=slots)
            kept.append(g)
        out.append(kept)
    return out


def drs_annotations(
    containers: Sequence[Sequence[Grant]], now: float, names: Sequence[str] = ()
) -> dict[str, str]:
    """``PatchAnnotations``' own keys. ``names`` are the pod's containers, init containers
    first; one not given is ``container-<i>``, as HAMi names it without the pod."""
    out = {ASSIGNED: "false", ASSIGNED_TIME: str(int(now * 1_000_000_000))}
    assigned: dict[str, dict[str, object]] = {}
    for i, grants in enumerate(containers):
        if not grants:
            continue
        chosen = grants[0]
        slices = slots_of(chosen)
        info: dict[str, object] = {"allocated": False, "request": slices}
        drs = chosen if isinstance(chosen, DrsGrant) else None
        if drs is not None and drs.profile_id:
            info["profileID"] = drs.profile_id
        if drs is not None and drs.profile_name:
            info["profileName"] = drs.profile_name
        assigned[names[i] if i < len(names) else f"container-{i}"] = info
        index = drs.index if drs is not None else ""
        if ASSIGNED_INDEX not in out and index:
            out[ASSIGNED_INDEX] = out[ASSIGNED_ID] = index
        minor = drs.minor if drs is not None else ""
        if ASSIGNED_MINOR not in out and minor:
            out[ASSIGNED_MINOR] = minor
        out.setdefault(REQUEST_SIZE, str(slices))
    if assigned:
        ordered = {name: assigned[name] for name in sorted(assigned)}  # Go sorts map keys
        out[ASSIGNED_CONTAINERS] = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False)
    return out


def _patch(pod: BindPod, containers: Sequence[Sequence[Grant]], now: float) -> dict[str, str]:
    """``PatchAnnotations`` with the pod's container names."""
    return drs_annotations(containers, now, pod.containers)


def _walk_decides(request: CardRequest, opts: FitOptions) -> bool:
    """The arrays' screen cannot see a profile: the walk decides every DRS request."""
    return True


ENFLAME = Vendor(
    name=VENDOR,
    register_annotation=CAPACITY_ANNOTATION,
    resources=frozenset({DRS_COUNT, MEMORY, CORES}),
    quota_memory=MEMORY,
    quota_cores=CORES,
    keys=KEYS,
    count_resource=DRS_COUNT,
    read_cards=no_annotation_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode,
    decode=decode,
    cordon_annotation="",
    walk=drs_walk,
    screened=False,
    more_annotations=_patch,
    more_keys=(
        ASSIGNED,
        ASSIGNED_TIME,
        ASSIGNED_INDEX,
        ASSIGNED_ID,
        ASSIGNED_MINOR,
        REQUEST_SIZE,
        ASSIGNED_CONTAINERS,
    ),
    walk_decides=_walk_decides,
    from_capacity=capacity_cards,
    capacity_names=(DRS_COUNT,),
    family=FAMILY,
)
"""HAMi's Enflame dialect for DRS-shared GCUs."""
