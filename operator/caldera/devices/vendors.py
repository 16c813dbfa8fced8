"""Every device dialect Caldera reads, written once; and reading a node's cards with it.

Adding a vendor is one module that builds a :class:`~caldera.devices.vendor.Vendor` and one entry
here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from caldera.devices.amd import AMD_GPU
from caldera.devices.ascend import ASCEND
from caldera.devices.awsneuron import AWS_NEURON
from caldera.devices.biren import BIREN
from caldera.devices.cambricon import CAMBRICON_MLU
from caldera.devices.enflame import ENFLAME
from caldera.devices.enflame_gcu import ENFLAME_GCU
from caldera.devices.hygon import HYGON_DCU
from caldera.devices.iluvatar import ILUVATAR
from caldera.devices.kunlun import KUNLUN_XPU
from caldera.devices.kunlun_vxpu import KUNLUN_VXPU
from caldera.devices.metax import METAX_GPU
from caldera.devices.metax_sgpu import METAX_SGPU
from caldera.devices.mindcluster_node import NODE_ANNOTATIONS as MINDCLUSTER_ANNOTATIONS
from caldera.devices.model import Card, Grant, NodeView, RegistrationError
from caldera.devices.mthreads import MTHREADS
from caldera.devices.nvidia import NVIDIA
from caldera.devices.vastai import VASTAI
from caldera.devices.vendor import Vendor
from caldera.devices.volcano_vgpu import VOLCANO_VGPU
from caldera.devices.volcano_vnpu import FAMILY as VNPU_FAMILY
from caldera.devices.volcano_vnpu import VOLCANO_VNPU

__all__ = [
    "ASSIGNMENT_ANNOTATIONS",
    "CAPACITY_NAMES",
    "COUNT_RESOURCES",
    "FAMILIES",
    "NODE_ANNOTATIONS",
    "VENDORS",
    "decoded",
    "enabled_vendors",
    "node_cards",
    "node_problems",
    "pod_problems",
]

VENDORS: tuple[Vendor, ...] = (
    NVIDIA,
    VOLCANO_VGPU,
    HYGON_DCU,
    *ASCEND,
    CAMBRICON_MLU,
    BIREN,
    VASTAI,
    AMD_GPU,
    AWS_NEURON,
    *ILUVATAR,
    MTHREADS,
    METAX_GPU,
    METAX_SGPU,
    ENFLAME,
    ENFLAME_GCU,
    KUNLUN_XPU,
    KUNLUN_VXPU,
    *VOLCANO_VNPU,
)
"""HAMi's NVIDIA dialect, Volcano's own vGPU dialect, HAMi's Hygon DCU, and HAMi's Ascend NPUs
(one per card type of its default device ConfigMap), then HAMi's other vendors, one line each."""


NODE_ANNOTATIONS = MINDCLUSTER_ANNOTATIONS | frozenset(
    key
    for vendor in VENDORS
    for key in (
        vendor.register_annotation,
        vendor.cordon_annotation,
        vendor.score_annotation,
        *vendor.node_keys,
    )
    if key
)
"""The node annotations a session reads: the shared-device registrations and what the vendors
read beside them (Ascend's ``hami-vnpu-core``), and MindCluster's chip lists: a change to one is
news to the operator."""
ASSIGNMENT_ANNOTATIONS = frozenset(key for vendor in VENDORS for key in vendor.written)
"""Pod annotations the binder writes (a card assignment): on a pending pod, not news."""
FAMILIES: frozenset[str] = frozenset(v.family for v in VENDORS if v.family) - {VNPU_FAMILY}
"""The vendors ``deviceshare.Vendors`` may name (HAMi's device ConfigMap sections); Volcano's
vNPUs are turned on by ``deviceshare.AscendHAMiVNPUEnable`` instead."""
COUNT_RESOURCES: frozenset[str] = frozenset(v.count_resource for v in VENDORS)
"""Each dialect's device count (``nvidia.com/gpu``): queues count it, deviceshare places it."""
CAPACITY_NAMES: frozenset[str] = frozenset(n for v in VENDORS for n in v.capacity_names)
"""The node capacity resources some vendor lists its cards from."""


@functools.lru_cache(maxsize=4096)
def _cards(vendor: Vendor, text: str) -> tuple[Card, ...] | str:
    try:
        return tuple(vendor.read_cards(text))
    except RegistrationError as exc:
        return str(exc)


@functools.lru_cache(maxsize=8192)
def _capacity_cards(
    vendor: Vendor,
    name: str,
    text: str | None,
    values: tuple[float | None, ...],
    marks: tuple[str | None, ...],
) -> tuple[Card, ...] | str:
    assert vendor.from_capacity is not None
    annotations = {} if text is None else {vendor.register_annotation: text}
    capacity = {r: v for r, v in zip(vendor.capacity_names, values, strict=True) if v is not None}
    labels = {k: v for k, v in zip(vendor.label_names, marks, strict=True) if v is not None}
    try:
        return tuple(vendor.from_capacity(name, annotations, capacity, labels))
    except RegistrationError as exc:
        return str(exc)


def node_cards(vendor: Vendor, node: NodeView) -> tuple[Card, ...] | str:
    """The cards a node registers for ``vendor`` (empty: none), or why the registration cannot
    be read. Parsed once per distinct registration (annotation text, or node name and
    capacity)."""
    text = node.annotations.get(vendor.register_annotation) if vendor.register_annotation else None
    if vendor.from_capacity is not None:
        values = tuple(node.capacity.get(r) for r in vendor.capacity_names)
        if all(v is None for v in values):
            return ()
        marks = tuple(node.labels.get(k) for k in vendor.label_names)
        return _capacity_cards(vendor, node.name, text, values, marks)
    if text is None:
        return ()
    return _cards(vendor, text)


def enabled_vendors(managed_resources: frozenset[str]) -> tuple[Vendor, ...]:
    """The vendors whose resources a plugin (deviceshare) manages in this policy: all of them,
    and the count too unless the vendor leaves it to the generic fit (Volcano's vNPUs, whose
    other resources HAMi's Ascend dialect shares)."""
    return tuple(
        v
        for v in VENDORS
        if v.resources <= managed_resources
        and (v.count_resource in managed_resources) != v.count_in_fit
    )


def node_problems(vendors: Sequence[Vendor], node: NodeView) -> list[str]:
    """Why a node's registrations cannot be read, naming the field."""
    out = []
    for vendor in vendors:
        got = node_cards(vendor, node)
        if isinstance(got, str):
            out.append(f"{vendor.source}: {got}; the node has no shareable {vendor.name} devices")
    return out


@functools.lru_cache(maxsize=8192)
def decoded(vendor: Vendor, text: str) -> tuple[tuple[Grant, ...], ...] | str:
    """A pod's grants per container from its allocation annotation, or why it cannot be read."""
    try:
        return tuple(tuple(c) for c in vendor.decode(text))
    except ValueError as exc:
        return str(exc)


def pod_problems(vendors: Sequence[Vendor], annotations: Mapping[str, str]) -> list[str]:
    """Why a pod's device allocation cannot be read (its cards are then not counted)."""
    out = []
    for vendor in vendors:
        text = annotations.get(vendor.keys.allocated)
        if text is not None:
            got = decoded(vendor, text)
            if isinstance(got, str):
                out.append(
                    f"metadata.annotations[{vendor.keys.allocated}]: {got}; "
                    "its devices are not counted"
                )
    return out
