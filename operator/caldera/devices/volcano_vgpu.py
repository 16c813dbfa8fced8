"""NVIDIA cards the Volcano way: Volcano's own vGPU dialect (``deviceshare.VGPUEnable``).

Volcano's scheduler and Project-HAMi's ``volcano-vgpu-device-plugin`` speak a fork of HAMi's
protocol under ``volcano.sh/`` names. Reading it lets a cluster that runs that device plugin move
to Caldera without touching its nodes or pods. The allocation string and the vendor word
(``NVIDIA``) are HAMi's, so the NVIDIA module's writer and reader are reused; what differs:

- the registration ``volcano.sh/node-vgpu-register`` is ``uuid,count,devmem,type,health,mode:``
  per card: no compute field (every card has 100), no NUMA, the index is the record's position,
  and the mode is ``mig`` or else ``hami-core``; no ``:`` at all means no cards;
- the request is ``volcano.sh/vgpu-number``, ``vgpu-memory``, ``vgpu-memory-percentage`` and
  ``vgpu-cores``: a memory limit without a count asks for one card, and none of HAMi's
  configured defaults apply (no default memory or cores, no memory factor: the plugin registers
  memory already divided by it);
- the bind annotations are ``volcano.sh/`` ones (``vgpu-ids-new`` is what usage is rebuilt from);
- the pod's say: ``nvidia.com/use-gputype`` (which, when given, makes ``nouse-gputype`` ignored),
  ``volcano.sh/vgpu-use-gpuuuid``/``vgpu-nouse-gpuuuid`` and ``volcano.sh/vgpu-mode``. The GPU
  policy is the scheduler's (``deviceshare.SchedulePolicy``); a pod cannot override it, and there
  is no NUMA binding, per-pod scoring weight or pair score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from caldera.devices.fit import FitOptions
from caldera.devices.hami import (
    DEFAULTS,
    GO_BOOLS,
    comma_list,
    decode_allocation,
    encode_allocation,
    go_int,
    named,
)
from caldera.devices.model import (
    UNSET_PERCENTAGE,
    Card,
    CardRequest,
    DeviceDefaults,
    RegistrationError,
)
from caldera.devices.nvidia import (
    NOUSE_TYPE,
    USE_TYPE,
    VENDOR,
)
from caldera.devices.vendor import BindKeys, Vendor

__all__ = [
    "KEYS",
    "REGISTER_ANNOTATION",
    "RESOURCES",
    "VOLCANO_VGPU",
    "container_request",
    "pod_options",
    "registered_cards",
]

REGISTER_ANNOTATION = "volcano.sh/node-vgpu-register"
COUNT, MEMORY, MEMORY_PERCENTAGE, CORES = (
    "volcano.sh/vgpu-number",
    "volcano.sh/vgpu-memory",
    "volcano.sh/vgpu-memory-percentage",
    "volcano.sh/vgpu-cores",
)
RESOURCES = frozenset({COUNT, MEMORY, MEMORY_PERCENTAGE, CORES})
KEYS = BindKeys(
    node="volcano.sh/vgpu-node",
    time="volcano.sh/vgpu-time",
    to_allocate="volcano.sh/devices-to-allocate",
    allocated="volcano.sh/vgpu-ids-new",
    phase="volcano.sh/bind-phase",
    bind_time="volcano.sh/bind-time",
    lock="hamivgpu",  # the node annotation Volcano and its device plugin lock with
)
USE_UUID, NOUSE_UUID = "volcano.sh/vgpu-use-gpuuuid", "volcano.sh/vgpu-nouse-gpuuuid"
VGPU_MODE = "volcano.sh/vgpu-mode"
_FIELDS = 6


def registered_cards(text: str) -> list[Card]:
    """The cards a node registers (``[]``: none); records without a comma are skipped, and the
    position among all ``:``-separated records is the card's index."""
    if ":" not in text:
        return []
    cards = []
    for i, record in enumerate(text.split(":")):
        if "," not in record:
            continue
        parts = record.split(",")
        if len(parts) < _FIELDS:
            raise RegistrationError(
                f"device {i}: expected uuid,count,devmem,type,health,mode, not {record!r}"
            )
        health = GO_BOOLS.get(parts[4].strip())
        if health is None:
            raise RegistrationError(f"device {i} health: expected true or false, not {parts[4]!r}")
        cards.append(
            Card(
                id=parts[0],
                count=go_int(parts[1], f"device {i} count"),
                devmem=go_int(parts[2], f"device {i} devmem"),
                devcore=100,
                type=parts[3],
                health=health,
                index=i,
                mode="mig" if parts[5].strip() == "mig" else "hami-core",
            )
        )
    return cards


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """What a container asks of each card, or None (no count and no memory limit, a count that is
    not positive, a memory that is not a whole non-negative number). ``defaults`` is ignored:
    they are HAMi's configmap, which Volcano's vGPU has none of."""
    nums = named(COUNT, limits, requests)
    if nums is None and MEMORY in limits:
        nums = 1  # Volcano's "single device" request
    if nums is None or nums <= 0:
        return None
    memory = named(MEMORY, limits, requests)
    memreq = 0
    if memory is not None:
        if memory < 0 or memory != int(memory):
            return None
        memreq = int(memory)
    percentage = UNSET_PERCENTAGE
    given = named(MEMORY_PERCENTAGE, limits, requests)
    if given is not None and given > 0:
        percentage = min(int(given), 100)
    if percentage == UNSET_PERCENTAGE and memreq == 0:
        percentage = 100  # the whole card
    cores = named(CORES, limits, requests)
    return CardRequest(
        vendor=VENDOR,
        nums=math.ceil(nums),  # Go's Quantity.Value() rounds up
        memreq=memreq,
        mem_percentage=percentage,
        coresreq=int(cores) if cores is not None else 0,
    )


def pod_options(
    annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
) -> FitOptions:
    """The model, UUID and mode selectors (``gpu_policy``: the scheduler's, used as is)."""
    use_types = comma_list(annotations.get(USE_TYPE))
    return FitOptions(
        gpu_policy=gpu_policy,
        use_types=use_types,
        nouse_types=() if use_types else comma_list(annotations.get(NOUSE_TYPE)),
        vgpu_mode=annotations.get(VGPU_MODE),
        use_uuids=frozenset(comma_list(annotations.get(USE_UUID))),
        nouse_uuids=frozenset(comma_list(annotations.get(NOUSE_UUID))),
        cordoned=cordon,
    )


VOLCANO_VGPU = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=RESOURCES,
    quota_memory=MEMORY,
    quota_cores=CORES,
    keys=KEYS,
    count_resource=COUNT,
    read_cards=registered_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
)
"""Volcano's own vGPU dialect."""
