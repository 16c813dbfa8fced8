"""What makes one device vendor: its annotations, its resource names, and how to read them.

A :class:`Vendor` is a value, not a subclass: the NVIDIA module builds one for HAMi's dialect and
one for Volcano's own vGPU dialect, and another vendor is one more module that builds its own.
Everything else (the device table, fit, score, usage, the bind annotations, quota) takes a
``Vendor`` and never names a vendor itself.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from caldera.devices.fit import CardUse, FitOptions, Walk
from caldera.devices.hami import CORDON_ANNOTATION
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError

__all__ = [
    "NO_LABELS",
    "BindKeys",
    "BindPod",
    "CapacityReader",
    "MoreAnnotations",
    "NodeReader",
    "NodeScore",
    "OptionsReader",
    "RequestReader",
    "ScoreInput",
    "Vendor",
    "no_annotation_cards",
]

RequestReader = Callable[
    [Mapping[str, float], Mapping[str, float], DeviceDefaults], CardRequest | None
]
"""(container limits, container requests, defaults) → what the container asks of each card."""
OptionsReader = Callable[[Mapping[str, str], str, frozenset[str]], FitOptions]
"""(pod annotations, default GPU policy, cordoned card ids) → the pod's fit options."""
NodeReader = Callable[[Mapping[str, str], FitOptions], FitOptions]
"""(node annotations, the pod's fit options) → the options on that node."""
CapacityReader = Callable[
    [str, Mapping[str, str], Mapping[str, float], Mapping[str, str]], list[Card]
]
"""(node name, node annotations, node capacity, node labels) → the cards of a vendor HAMi reads
from node capacity (``GetNodeDevices`` on ``n.Status.Capacity``). Only the vendor's
``capacity_names`` and ``label_names`` are given."""
NO_LABELS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ScoreInput:
    """What a vendor's ``ScoreNode`` sees of one node that would hold the pod."""

    annotations: Mapping[str, str]
    """The node's annotations."""
    cards: Sequence[Card]
    before: Sequence[CardUse]
    """Each card's usage before the pod (HAMi's ``previous``)."""
    grants: Sequence[Sequence[Grant]]
    """What the pod would get there, per container."""
    opts: FitOptions
    policy: str
    """The node policy in force (``binpack`` or ``spread``)."""


NodeScore = Callable[[ScoreInput], float]
"""A vendor's ``ScoreNode``, weighted as HAMi's ``OverrideScore`` weights it: what it adds to
HAMi's score of the node (binpack takes the highest total, spread the lowest)."""


@dataclass(frozen=True, slots=True)
class BindPod:
    """What a vendor's own bind annotations may read of the pod and where it goes."""

    annotations: Mapping[str, str]
    node: str = ""
    containers: tuple[str, ...] = ()
    """The container names, init containers first (the order of the grants)."""


MoreAnnotations = Callable[[BindPod, Sequence[Sequence[Grant]], float], dict[str, str]]
"""(the pod, grants per container, now) → the vendor's own bind annotations."""


def no_annotation_cards(text: str) -> list[Card]:
    """The ``read_cards`` of a vendor whose cards are read from node capacity
    (``from_capacity``): it registers nothing on the node to read, so this is never called."""
    raise RegistrationError("this vendor's cards are read from node capacity, not an annotation")


@dataclass(frozen=True, slots=True)
class BindKeys:
    """The pod annotations a scheduler writes before binding, in one dialect."""

    node: str
    """The node chosen (``hami.io/vgpu-node``); a pod carrying it counts as holding its cards."""
    time: str
    to_allocate: str
    """Read and consumed by the device plugin, container by container."""
    allocated: str
    """Kept: the scheduler rebuilds card usage from it."""
    phase: str
    bind_time: str
    lock: str
    """The node annotation holding the node lock ("": the vendor takes none)."""

    @property
    def written(self) -> tuple[str, ...]:
        """The pod annotations one assignment writes (all but the node lock)."""
        return (self.node, self.time, self.to_allocate, self.allocated, self.phase, self.bind_time)


HAMI_KEYS = BindKeys(
    node="hami.io/vgpu-node",
    time="hami.io/vgpu-time",
    to_allocate="hami.io/vgpu-devices-to-allocate",
    allocated="hami.io/vgpu-devices-allocated",
    phase="hami.io/bind-phase",
    bind_time="hami.io/bind-time",
    lock="hami.io/mutex.lock",
)


@dataclass(frozen=True, slots=True)
class Vendor:
    name: str
    """The vendor word of requests and allocation strings (``NVIDIA``); a card is this vendor's
    when its model contains it."""
    register_annotation: str
    """The node annotation listing the node's cards."""
    resources: frozenset[str]
    """Resource names this vendor's requests use: kept out of the generic resource fit."""
    quota_memory: str
    """The resource whose ``limits.`` quota caps device memory (§6), and the one for cores."""
    quota_cores: str
    keys: BindKeys
    count_resource: str
    """The resource counting the device plugin's devices in node allocatable: when it is there
    and 0, the plugin is gone and the registration is stale."""
    read_cards: Callable[[str], list[Card]]
    read_request: RequestReader
    read_options: OptionsReader
    encode: Callable[[Sequence[Sequence[Grant]]], str]
    decode: Callable[[str], list[list[Grant]]]
    score_annotation: str = ""
    """The node annotation with the cards' pair scores (topology-aware), if the vendor has one."""
    read_pair_scores: Callable[[str], dict[str, dict[str, int]]] | None = None
    cordon_annotation: str = CORDON_ANNOTATION
    """The node annotation listing cordoned cards ("": the vendor has none)."""
    walk: Walk | None = None
    """The vendor's own card walk (None: HAMi's NVIDIA ``Fit``)."""
    read_node: NodeReader | None = None
    read_instances: Callable[[str], dict[str, list[tuple[int, int]]]] | None = None
    """Reads ``hami.io/vgpu-mig-allocations`` (the first of ``more_keys``): per card UUID, the
    (start, size) of the MIG instances a pod holds there."""
    node_keys: tuple[str, ...] = ()
    """The node annotations ``read_node`` reads (a change to one is news to the operator)."""
    more_annotations: MoreAnnotations | None = None
    more_keys: tuple[str, ...] = ()
    """The keys ``more_annotations`` writes."""
    core_unit: str = "% cores"
    """How a grant's cores read (``caldera explain``): percent of a card, or Ascend's AI cores
    (a soft split counts in percent whatever the vendor)."""
    walk_decides: Callable[[CardRequest, FitOptions], bool] | None = None
    """Whether only the vendor's walk can tell if a node holds this request (the arrays' walk
    is then a first sieve)."""
    score_node: NodeScore | None = None
    """The vendor's own ``ScoreNode`` (None: 0, HAMi's default for most vendors)."""
    screened: bool = True
    """Whether the arrays' walk (HAMi's NVIDIA checks, vectorised) may sieve nodes before the
    vendor's own walk. False for a vendor whose checks differ (order, reason words, units): then
    only the count of cards is sieved by the arrays, and the vendor's walk gives each node's
    verdict and reasons."""
    from_capacity: CapacityReader | None = None
    """Set for a vendor whose cards are read from node capacity; ``read_cards`` is then unused
    and ``register_annotation`` is read (if set) only as ``from_capacity``'s annotations."""
    capacity_names: tuple[str, ...] = ()
    """The capacity resources ``from_capacity`` reads: a node with none of them has no cards of
    this vendor."""
    label_names: tuple[str, ...] = ()
    """The node labels ``from_capacity`` reads (AWS Neuron: the instance type)."""
    family: str = ""
    """The section of HAMi's device ConfigMap this dialect belongs to (``cambricon``,
    ``metax``...), named in ``deviceshare.Vendors`` to share it; "": shared whenever
    ``deviceshare.VGPUEnable`` is set (NVIDIA, Hygon, Volcano's vGPU)."""
    memory_factor: int | None = None
    """MiB per unit of the vendor's memory resource where HAMi fixes it (Cambricon's 256): the
    namespace quota on that resource counts in these units. None: ``deviceshare.MemoryFactor``."""
    lock_expiry: float | None = None
    """Seconds after which another pod's node lock is stale, where the vendor fixes it
    (Cambricon: 2 minutes); None: ``deviceshare.NodeLockTimeout``."""
    bare_lock: bool = False
    """The node lock's value is the RFC 3339 time alone (Cambricon's ``dsmlu.lock``), not
    HAMi's ``time,namespace,pod``."""
    count_in_fit: bool = False
    """The count resource stays in the generic resource fit, checked against the node's
    allocatable (Volcano's vNPUs: ``GetIgnoredDevices`` names memory and cores alone), and
    :attr:`resources` leaves it out."""
    app_only: bool = False
    """Only app containers ask for cards; init containers get none (Volcano's
    ``ResourceReqs`` ranges over ``pod.Spec.Containers``)."""
    holders: (
        Callable[
            [Sequence[tuple[Mapping[str, str], Sequence[Sequence[Grant]]]]],
            Mapping[str, Sequence[Hashable]],
        ]
        | None
    ) = None
    """What the vendor notes of each container holding a card, from the pods on the node (their
    annotations and grants): handed to its walk and score as
    :attr:`~caldera.devices.fit.FitOptions.holders` (MetaX sGPU: ``PodInfos``). None: not read."""
    score_alone: bool = False
    """The node score is :attr:`score_node` alone, summed over the pod's requests, rounded
    and multiplied by ``deviceshare.ScheduleWeight`` (Volcano's ``getDeviceScore``), not
    added to HAMi's usage score."""

    @property
    def asked_by(self) -> frozenset[str]:
        """The resources naming a request of this vendor (:attr:`resources` and the count)."""
        return self.resources | {self.count_resource}

    @property
    def source(self) -> str:
        """Where a node registers this vendor's cards, as a field path for messages."""
        if self.from_capacity is not None:
            return f"status.capacity[{', '.join(self.capacity_names)}]"
        return f"metadata.annotations[{self.register_annotation}]"

    def bind_annotations(
        self,
        node: str,
        containers: Sequence[Sequence[Grant]],
        now: float,
        pod: Mapping[str, str] | None = None,
        names: Sequence[str] = (),
    ) -> dict[str, str]:
        """What the pod (``pod``: its annotations; ``names``: its containers', init containers
        first) gets before its binding: HAMi's Filter and Bind writes, and the vendor's own, in
        one patch."""
        encoded = self.encode(containers)
        seconds = str(int(now))
        values = (node, seconds, encoded, encoded, "allocating", seconds)
        out = dict(zip(self.keys.written, values, strict=True))
        if self.more_annotations is not None:
            bind = BindPod(pod or {}, node, tuple(names))
            out.update(self.more_annotations(bind, containers, now))
        return out

    @property
    def written(self) -> tuple[str, ...]:
        """Every pod annotation a bind writes."""
        return self.keys.written + self.more_keys
