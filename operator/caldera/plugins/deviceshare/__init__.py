"""deviceshare: GPUs shared by memory and compute, the way HAMi shares them.

Volcano's plugin name and arguments; HAMi's protocol and algorithms. With
``deviceshare.VGPUEnable`` the plugin

- keeps every vendor's device resources (``nvidia.com/gpu``, ``gpumem``, ``gpumem-percentage``,
  ``gpucores``, Volcano's ``volcano.sh/vgpu-*``, Hygon's ``hygon.com/dcu*``, Ascend's
  ``huawei.com/<card type>*``) out of the generic resource fit, as HAMi tells kube-scheduler to;
- filters nodes with HAMi's per-card walk (its reasons, e.g. ``CardInsufficientMemory``, join
  the pod's pending message), registered on the predicate point (``enablePredicate``);
- scores nodes with HAMi's node score, binpack (fullest first) or spread (emptiest first) by
  ``deviceshare.SchedulePolicy`` or the pod's ``hami.io/node-scheduler-policy``, times
  ``deviceshare.ScheduleWeight`` (``enableNodeOrder``; weight 0, Volcano's default, leaves node
  choice to the other scorers);
- reserves the cards on placement (a gang that cannot start gives them all back) and hands the
  binder the pod annotations HAMi's device plugin reads, with the node lock when
  ``deviceshare.NodeLockEnable`` is set.

HAMi's own knobs, which Volcano's plugin does not have, are arguments too:
``deviceshare.GPUSchedulerPolicy`` (card order: ``spread``, ``binpack``, ``topology-aware``,
``mutex``, with ``numa`` chains), ``deviceshare.DefaultMemory``, ``deviceshare.DefaultCores``,
``deviceshare.MemoryFactor`` and ``deviceshare.NodeLockTimeout``; ``deviceshare.AscendEnable``
(HAMi's ``--enable-ascend``) adds Ascend NPUs in HAMi's dialect.

``deviceshare.AscendHAMiVNPUEnable`` shares Ascend NPUs the way Volcano's own scheduler applies
HAMi's vNPU protocol (:mod:`caldera.devices.volcano_vnpu`), with or without ``VGPUEnable``: the
card types are those of the device ConfigMap named by ``deviceshare.KnownGeometriesCMName`` and
``KnownGeometriesCMNamespace`` (Volcano's default, the 310P alone, when it cannot be read), and
the cards are ordered by ``deviceshare.SchedulePolicy``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, PrivateAttr, field_validator, model_validator

from caldera.api.task import NodeLock, Task
from caldera.devices.device_names import NO_NAMES, DeviceNames, read_device_config
from caldera.devices.model import DeviceDefaults
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import FAMILIES, VENDORS
from caldera.devices.volcano_vnpu import FAMILY as VNPU_FAMILY
from caldera.devices.volcano_vnpu import IGNORED_RESOURCES as VNPU_IGNORED
from caldera.devices.volcano_vnpu import vnpu_vendors
from caldera.devices.volcano_vnpu_config import device_config
from caldera.framework.duration import parse_go_duration
from caldera.framework.interfaces import EventHandler, IntArray, Rejection, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.plugin import Args as BaseArgs
from caldera.framework.scoring import NodeScorer
from caldera.plugins.deviceshare.gpushare import GpuShare
from caldera.plugins.deviceshare.mindcluster import open_mindcluster
from caldera.plugins.deviceshare.scores import device_scores
from caldera.plugins.deviceshare.state import RELEASABLE_REASONS, DeviceState
from caldera.plugins.deviceshare.verdicts import explain as device_verdict

__all__ = ["DeviceShareArgs", "DeviceSharePlugin"]

_CARD_POLICIES = frozenset({"spread", "binpack", "topology-aware", "mutex", "numa"})


class DeviceShareArgs(Args):
    vgpu: bool = Field(False, alias="deviceshare.VGPUEnable")
    node_lock: bool = Field(False, alias="deviceshare.NodeLockEnable")
    schedule_policy: Literal["", "binpack", "spread"] = Field(
        "", alias="deviceshare.SchedulePolicy"
    )
    schedule_weight: int = Field(0, ge=0, alias="deviceshare.ScheduleWeight")
    gpu_sharing: bool = Field(False, alias="deviceshare.GPUSharingEnable")
    gpu_number: bool = Field(False, alias="deviceshare.GPUNumberEnable")
    ascend_mindcluster: bool = Field(False, alias="deviceshare.AscendMindClusterVNPUEnable")
    ascend_hami: bool = Field(False, alias="deviceshare.AscendHAMiVNPUEnable")
    """Volcano's HAMi vNPUs (``hami.AscendHAMiVNPUEnable``)."""
    ascend: bool = Field(False, alias="deviceshare.AscendEnable")
    """Caldera's: with ``VGPUEnable``, share Ascend NPUs in HAMi's dialect (the same as naming
    ``ascend`` in ``deviceshare.Vendors``). Off, Ascend resources stay ordinary extended
    resources (a cluster on Huawei's own device plugin keeps scheduling whole NPUs that way)."""
    families: tuple[str, ...] = Field((), alias="deviceshare.Vendors")
    """Caldera's: the other vendors of HAMi's device ConfigMap to share with ``VGPUEnable``
    (``cambricon``, ``metax``...; a list or a comma-separated string). A vendor not named keeps
    its resources as ordinary extended resources, so a cluster on the vendor's own device
    plugin keeps scheduling whole devices."""
    known_geometries_name: str = Field(
        "volcano-vgpu-device-config", alias="deviceshare.KnownGeometriesCMName"
    )
    known_geometries_namespace: str = Field(
        "kube-system", alias="deviceshare.KnownGeometriesCMNamespace"
    )
    gpu_policy: str = Field("spread", alias="deviceshare.GPUSchedulerPolicy")
    default_memory: int = Field(0, ge=0, alias="deviceshare.DefaultMemory")
    default_cores: int = Field(0, ge=0, le=100, alias="deviceshare.DefaultCores")
    memory_factor: int = Field(1, ge=1, alias="deviceshare.MemoryFactor")
    node_lock_timeout: str = Field("5m", alias="deviceshare.NodeLockTimeout")
    device_config_file: str = Field("", alias="deviceshare.DeviceConfigFile")
    """Caldera's: HAMi's device configuration (its ``--device-config-file``, the
    ``hami-scheduler-device`` ConfigMap mounted as a file), for the resource names it renames."""
    _names: DeviceNames = PrivateAttr(default=NO_NAMES)

    @field_validator("device_config_file")
    @classmethod
    def _readable(cls, value: str) -> str:
        if value:
            read_device_config(value)  # a ValueError names the file and the field at fault
        return value

    @model_validator(mode="after")
    def _read_names(self) -> DeviceShareArgs:
        if self.device_config_file:
            self._names = read_device_config(self.device_config_file)
        return self

    @property
    def names(self) -> DeviceNames:
        """The resource names the device configuration gives the vendors (none: the chart's)."""
        return self._names

    @field_validator("families", mode="before")
    @classmethod
    def _families(cls, value: object) -> object:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple):
            if VNPU_FAMILY in value:
                raise ValueError(
                    f"{VNPU_FAMILY!r} is turned on by deviceshare.AscendHAMiVNPUEnable, not here"
                )
            unknown = [v for v in value if v not in FAMILIES]
            if unknown:
                known = ", ".join(sorted(FAMILIES))
                raise ValueError(f"unknown vendor {unknown[0]!r} (known: {known})")
            return tuple(value)
        return value

    @model_validator(mode="after")
    def _one_gpu_mode(self) -> DeviceShareArgs:
        # Volcano's deviceshare New refuses these combinations (klog.Fatal)
        if self.gpu_sharing and self.gpu_number:
            raise ValueError(
                "deviceshare.GPUSharingEnable and deviceshare.GPUNumberEnable cannot both be true"
            )
        if (self.gpu_sharing or self.gpu_number) and self.vgpu:
            raise ValueError(
                "deviceshare.GPUSharingEnable or GPUNumberEnable cannot be used with "
                "deviceshare.VGPUEnable"
            )
        if self.ascend_hami and self.vgpu and (self.ascend or "ascend" in self.families):
            # Caldera's own: both dialects read the same registrations and resources
            raise ValueError(
                "deviceshare.AscendHAMiVNPUEnable (Volcano's Ascend vNPUs) cannot be used with "
                "HAMi's Ascend dialect (deviceshare.AscendEnable or ascend in deviceshare.Vendors)"
            )
        return self

    @field_validator("gpu_policy")
    @classmethod
    def _card_policy(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",")]
        unknown = [p for p in parts if p not in _CARD_POLICIES]
        if unknown:
            known = ", ".join(sorted(_CARD_POLICIES))
            raise ValueError(f"unknown GPU policy {unknown[0]!r} (known: {known})")
        return value

    @field_validator("node_lock_timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        if parse_go_duration(value) <= 0:
            raise ValueError("must be a positive duration, e.g. 5m")
        return value

    @property
    def vendors(self) -> tuple[Vendor, ...]:
        """The dialects shared: those of no family, and those of the families named."""
        named = {*self.families, *(("ascend",) if self.ascend else ())}
        return tuple(
            v for v in VENDORS if v.family != VNPU_FAMILY and (not v.family or v.family in named)
        )

    @property
    def device_config_key(self) -> str:
        """``namespace/name`` of the device ConfigMap (``KnownGeometriesCM...``)."""
        return f"{self.known_geometries_namespace}/{self.known_geometries_name}"

    @property
    def defaults(self) -> DeviceDefaults:
        return DeviceDefaults(self.default_memory, self.default_cores, self.memory_factor)


class DeviceSharePlugin(Plugin[DeviceShareArgs]):
    name: ClassVar[str] = "deviceshare"
    Args = DeviceShareArgs

    @classmethod
    def managed_resources(cls, args: BaseArgs) -> frozenset[str]:
        if not isinstance(args, DeviceShareArgs):
            return frozenset()
        shared: frozenset[str] = frozenset()
        if args.vgpu:
            shared = shared.union(*(v.resources for v in args.vendors))
        shared = (shared | VNPU_IGNORED) if args.ascend_hami else shared
        if not args.names:
            return shared
        # a count the configuration renames stays in the node resource fit (nodes advertise it,
        # queues count it), the way Volcano leaves a device's count there
        renamed = {v.count_resource for v in VENDORS if args.names.outward(v.count_resource)
                   != v.count_resource}  # fmt: skip
        return args.names.outward_all(shared - renamed)

    @classmethod
    def read_objects(cls, args: BaseArgs) -> frozenset[tuple[str, str]]:
        """The device ConfigMap Volcano's vNPUs take their card types from."""
        if not isinstance(args, DeviceShareArgs) or not args.ascend_hami:
            return frozenset()
        return frozenset({("ConfigMap", args.device_config_key)})

    def on_session_open(self, ssn: SessionView) -> None:
        self.state: DeviceState | None = None
        self._ssn = ssn
        if self.args.ascend_mindcluster:  # Volcano's MindCluster 310P vNPUs
            open_mindcluster(ssn, self.args.schedule_weight)
        if self.args.gpu_sharing or self.args.gpu_number:
            share = GpuShare(ssn.snapshot, "memory" if self.args.gpu_sharing else "number")
            ssn.predicate_point.add(self.name, share.predicate)
            ssn.event_handlers.add(
                self.name, EventHandler(allocate=share.allocate, deallocate=share.release)
            )
        if not self.args.vgpu and not self.args.ascend_hami:
            return
        args = self.args
        state = DeviceState(
            ssn.snapshot, args.defaults, args.gpu_policy, self._vendors(ssn), args.names
        )
        self.state = state
        timeout = parse_go_duration(self.args.node_lock_timeout)
        now = ssn.now

        def reserve(task: Task) -> None:
            held = state.reserve(task, now)
            if self.args.node_lock and held:
                vendor = state.vendors[held[0][0]]
                if vendor.keys.lock:
                    expiry = timeout if vendor.lock_expiry is None else vendor.lock_expiry
                    task.node_lock = NodeLock(expiry, vendor.keys.lock, vendor.bare_lock)

        def unreserve(task: Task) -> None:
            state.unreserve(task)
            task.node_lock = None

        ssn.pre_predicate_point.add(self.name, state.pre_predicate)
        ssn.predicate_point.add(self.name, self._predicate)
        ssn.simulate_predicate_point.add(self.name, state.simulate)
        ssn.releasable_reasons.update(RELEASABLE_REASONS)
        ssn.event_handlers.add(self.name, EventHandler(allocate=reserve, deallocate=unreserve))
        if self.args.schedule_weight > 0:
            ssn.node_order_point.add(self.name, NodeScorer(self._score))

    def _vendors(self, ssn: SessionView) -> tuple[Vendor, ...]:
        """The dialects this session shares: ``VGPUEnable``'s, and Volcano's vNPUs of the card
        types the device ConfigMap names (``InitDevicesConfig``, ``registerDevices``)."""
        shared = self.args.vendors if self.args.vgpu else ()
        if not self.args.ascend_hami:
            return shared
        where = self.args.device_config_key
        found = ssn.snapshot.config_maps.get(where)
        config = device_config(None if found is None else (found.data or {}), where)
        return shared + vnpu_vendors(config, self.args.schedule_policy)

    def _predicate(self, task: Task) -> list[Rejection]:
        assert self.state is not None
        rejections = self.state.predicate(task)
        if rejections and task.key == self._ssn.traced:  # caldera explain: each card's answer
            refused = np.logical_or.reduce([mask for _, mask in rejections])
            notes: dict[str, str] = {}
            for row in np.flatnonzero(refused).tolist():
                said = device_verdict(self.state, task, row)
                if said is not None and not said[0]:
                    notes[self._ssn.nodes.names[row]] = said[1]
            self._ssn.result.traced_notes = notes
        return rejections

    def _score(self, task: Task, rows: IntArray) -> np.typing.NDArray[np.float64] | float:
        assert self.state is not None
        args = self.args
        return device_scores(self.state, task, rows, args.schedule_policy, args.schedule_weight)
