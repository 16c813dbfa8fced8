"""NVIDIA cards the HAMi way: the node registration, the pod's requests, the allocation string.

Exactly what HAMi's device plugin writes and reads (../shared/reference/hami.md §1–§3), so that
HAMi's device plugin and HAMi-core keep working unchanged with Caldera as the scheduler:

- the registration ``hami.io/node-nvidia-register`` (JSON or the legacy colon form, read by
  :mod:`caldera.devices.hami`) and the pair scores ``hami.io/node-nvidia-score``;
- a container's request from ``nvidia.com/gpu``, ``gpumem``, ``gpumem-percentage`` and
  ``gpucores`` (limits first, then requests; the whole-card rule; an invalid memory empties the
  request), init containers first;
- the allocation string, with ``NVIDIA`` as the vendor word;
- the pod's say in where its cards come from: model and UUID selectors, vGPU mode, NUMA binding,
  GPU and node policy overrides, scoring weights.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence

from caldera.devices import mig
from caldera.devices.fit import FitOptions
from caldera.devices.hami import (
    CORDON_ANNOTATION,
    DEFAULTS,
    GO_BOOLS,
    GPU_POLICY,
    SCORING_WEIGHTS,
    comma_list,
    decode_allocation,
    encode_allocation,
    named,
    registered_cards,
    scoring_weights,
)
from caldera.devices.model import (
    UNSET_PERCENTAGE,
    Card,
    CardRequest,
    DeviceDefaults,
    Grant,
    RegistrationError,
)
from caldera.devices.vendor import HAMI_KEYS, BindPod, Vendor

__all__ = [
    "NVIDIA",
    "REGISTER_ANNOTATION",
    "RESOURCES",
    "SCORE_ANNOTATION",
    "VENDOR",
    "container_request",
    "pair_scores",
    "pod_options",
]

VENDOR = "NVIDIA"
REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
SCORE_ANNOTATION = "hami.io/node-nvidia-score"
COUNT, MEMORY, MEMORY_PERCENTAGE, CORES = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
)
PRIORITY = "nvidia.com/priority"
RESOURCES = frozenset({COUNT, MEMORY, MEMORY_PERCENTAGE, CORES, PRIORITY})
"""Kept out of the generic resource fit: nodes never advertise them (HAMi marks them ignored)."""


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


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """What a container asks of each card, or None (no ``nvidia.com/gpu``, or a memory that is
    not a whole non-negative number, which empties the request as HAMi does)."""
    nums = named(COUNT, limits, requests)
    if nums is None or nums <= 0:
        return None
    memory = named(MEMORY, limits, requests)
    memreq = 0
    if memory is not None:
        if memory < 0 or memory != int(memory):
            return None
        memreq = int(memory) * defaults.memory_factor
    percentage = UNSET_PERCENTAGE
    given = named(MEMORY_PERCENTAGE, limits, requests)
    if given is not None and given > 0:
        percentage = min(int(given), 100)
    if percentage == UNSET_PERCENTAGE and memreq == 0:
        if defaults.default_memory:
            memreq = defaults.default_memory
        else:
            percentage = 100  # the whole card
    cores = named(CORES, limits, requests)
    return CardRequest(
        vendor=VENDOR,
        nums=int(nums),
        memreq=memreq,
        mem_percentage=percentage,
        coresreq=int(cores) if cores is not None else defaults.default_cores,
    )


USE_TYPE, NOUSE_TYPE = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
USE_UUID, NOUSE_UUID = "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid"
VGPU_MODE, NUMA_BIND = "nvidia.com/vgpu-mode", "nvidia.com/numa-bind"


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
        numa_bind=GO_BOOLS.get(annotations.get(NUMA_BIND, "").strip(), False),
        use_types=comma_list(annotations.get(USE_TYPE)),
        nouse_types=comma_list(annotations.get(NOUSE_TYPE)),
        vgpu_mode=annotations.get(VGPU_MODE),
        use_uuids=frozenset(comma_list(annotations.get(USE_UUID))),
        nouse_uuids=frozenset(comma_list(annotations.get(NOUSE_UUID))),
        cordoned=cordon,
        weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
    )


_OPTION_KEYS = frozenset(
    {GPU_POLICY, NUMA_BIND, USE_TYPE, NOUSE_TYPE, VGPU_MODE, USE_UUID, NOUSE_UUID, SCORING_WEIGHTS}
)


@functools.lru_cache(maxsize=64)
def _plain_options(gpu_policy: str, cordon: frozenset[str]) -> FitOptions:
    return FitOptions(gpu_policy=gpu_policy, cordoned=cordon)


def _options(annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str]) -> FitOptions:
    return pod_options(annotations, gpu_policy=gpu_policy, cordon=cordon)


def nvidia_cards(text: str) -> list[Card]:
    """The registration with each card's MIG profiles (cards in ``mig`` mode list them)."""
    return registered_cards(text, mig.profiles_of)


def _mig_annotations(
    pod: BindPod, containers: Sequence[Sequence[Grant]], now: float
) -> dict[str, str]:
    """``PatchAnnotations``: the MIG instances the pod gets, for HAMi's device plugin to create
    (nothing for a pod with none)."""
    encoded = mig.encode_allocations(containers)
    return {mig.ALLOCATIONS_ANNOTATION: encoded} if encoded else {}


NVIDIA = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=RESOURCES,
    quota_memory=MEMORY,
    quota_cores=CORES,
    keys=HAMI_KEYS,
    count_resource=COUNT,
    read_cards=nvidia_cards,
    read_request=container_request,
    read_options=_options,
    encode=encode_allocation,
    decode=decode_allocation,
    score_annotation=SCORE_ANNOTATION,
    read_pair_scores=pair_scores,
    cordon_annotation=CORDON_ANNOTATION,
    more_annotations=_mig_annotations,
    more_keys=(mig.ALLOCATIONS_ANNOTATION,),
    read_instances=mig.decode_allocations,
)
"""HAMi's NVIDIA dialect."""
