"""What MindCluster's vNPU scheduling reads beyond the Node: init-params and ConfigMaps.

Volcano's port of MindCluster (``third_party/mindcluster/common/k8s/cmmgr.go``, ``type.go``,
``configmap.go``; ``common/util/util.go``; the plugin's ``init_policy.go``) at ed72c7c8 reads:

- the scheduler policy's ``configurations`` entry ``init-params`` (``getConfigurationByKey``):
  ``presetVirtualDevice`` (read and never used: the port only virtualizes dynamically),
  ``useClusterInfoManager`` and ``self-maintain-available-card`` (both default true);
- with ``useClusterInfoManager``, ClusterD's ConfigMaps in ``mindx-dl`` labelled
  ``mx-consumer-volcano=true``: ``cluster-info-device-*`` (per node, its device list) and
  ``cluster-info-node-cm`` (per node, NodeD's status); without it, every namespace's ConfigMaps
  labelled ``mx-consumer-cim=true`` that are the device plugin's
  ``kube-system/mindx-dl-deviceinfo-<node>`` or NodeD's ``mindx-dl/mindx-dl-nodeinfo-<node>``;
- with ``self-maintain-available-card``, the node's free chips are worked out rather than taken
  from the device list: the node's ``baseDeviceInfos`` chips less those the node's running pods
  name in ``huawei.com/<type>`` and those the list says are unhealthy or recovering.

:class:`ClusterInfo` keeps these as an informer would, fed one ConfigMap at a time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from caldera.devices.mindcluster_chip import NpuPod

__all__ = [
    "BASE_DEVICE_INFOS",
    "INIT_PARAMS",
    "ClusterInfo",
    "ConfigMapView",
    "DeviceInfo",
    "InitParams",
    "available",
]

INIT_PARAMS = "init-params"
"""The policy ``configurations`` entry whose arguments are MindCluster's parameters."""
_PRESET, _USE_CLUSTER_D, _SELF_MAINTAIN = (
    "presetVirtualDevice",
    "useClusterInfoManager",
    "self-maintain-available-card",
)
MINDX_DL, KUBE_SYSTEM = "mindx-dl", "kube-system"
CLUSTER_CONSUMER, DEVICE_CONSUMER = "mx-consumer-volcano", "mx-consumer-cim"
CLUSTER_DEVICE_PREFIX, CLUSTER_NODE_NAME = "cluster-info-device-", "cluster-info-node-cm"
DEVICE_INFO_PREFIX, NODE_INFO_PREFIX = "mindx-dl-deviceinfo-", "mindx-dl-nodeinfo-"
DEVICE_INFO_KEY, NODE_INFO_KEY = "DeviceInfoCfg", "NodeInfo"
BASE_DEVICE_INFOS = "baseDeviceInfos"
"""The node annotation listing every chip the node has (a JSON object keyed by chip name)."""
_MAX_ANNOTATION, _MAX_DEVICES = 1024 * 1024, 100


@dataclass(frozen=True, slots=True)
class InitParams:
    """The ``init-params`` Volcano's port reads."""

    preset_virtual_device: bool = False
    """``presetVirtualDevice``: read, never used (the port always virtualizes at bind)."""
    use_cluster_d: bool = True
    """``useClusterInfoManager``: ClusterD's ConfigMaps, else the device plugin's and NodeD's."""
    self_maintain: bool = True
    """``self-maintain-available-card``: work the free chips out (:func:`available`)."""

    @classmethod
    def from_policy(cls, configurations: object) -> InitParams:
        """``getConfigurationByKey``: the first ``configurations`` entry named ``init-params``
        (a policy without one, or with ``configurations`` empty, has every default)."""
        for entry in configurations if isinstance(configurations, list) else ():
            if isinstance(entry, Mapping) and entry.get("name") == INIT_PARAMS:
                arguments = entry.get("arguments")
                return cls.read(arguments if isinstance(arguments, Mapping) else None)
        return cls()

    @classmethod
    def read(cls, arguments: Mapping[str, object] | None) -> InitParams:
        """``initDynamicParameters`` and ``initStaticParameters`` on the ``init-params``
        arguments. Go reads them as strings: a YAML ``false`` is ``"false"``; a map or list
        value makes the whole entry unreadable, so every default holds."""
        args: dict[str, str] = {}
        for key, value in (arguments or {}).items():
            if isinstance(value, Mapping | list):
                return cls()
            args[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return cls(
            args.get(_PRESET) == "true",
            args.get(_USE_CLUSTER_D, "true") == "true",
            args.get(_SELF_MAINTAIN, "true") == "true",
        )


class ConfigMapView(NamedTuple):
    namespace: str
    name: str
    labels: Mapping[str, str]
    data: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """A node's device list (``NodeDeviceInfoWithID``): ``huawei.com/Ascend310P`` (free chips),
    ``huawei.com/Ascend310P-Unhealthy``... and when it was written (Unix seconds)."""

    devices: Mapping[str, str] = field(default_factory=dict)
    update_time: int = 0
    super_pod_id: int = 0


class _Unreadable(ValueError):
    """Go's ``json.Unmarshal`` would fail: the ConfigMap is passed over."""


def _fields(value: Any) -> dict[str, Any]:
    """A JSON object's keys as Go's decoder matches them (case-insensitively, last wins);
    ``null`` is an empty object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Unreadable("not an object")
    return {key.lower(): v for key, v in value.items()}


def _integer(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Unreadable("not an integer")
    return value


def _device_info(value: Any) -> DeviceInfo:
    """``NodeDeviceInfo`` (with ``SuperPodID`` when there is one); the device list's keys are
    a map's, kept as written."""
    fields = _fields(value)
    devices = fields.get("devicelist") or {}
    if not isinstance(devices, dict) or not all(isinstance(v, str) for v in devices.values()):
        raise _Unreadable("DeviceList must map names to strings")
    return DeviceInfo(
        dict(devices), _integer(fields.get("updatetime")), _integer(fields.get("superpodid"))
    )


def _node_status(value: Any) -> str:
    """``NodeDNodeInfo.NodeStatus``."""
    fields = _fields(value)
    faults = fields.get("faultdevlist")
    if faults is not None and not isinstance(faults, list):
        raise _Unreadable("FaultDevList must be a list")
    status = fields.get("nodestatus")
    if status is None:
        return ""
    if not isinstance(status, str):
        raise _Unreadable("NodeStatus must be a string")
    return status


def _json(cm: ConfigMapView, key: str) -> Any:
    """``getDataFromCM``: the key's JSON (None when empty); missing or bad: passed over."""
    if key not in cm.data:
        raise _Unreadable(f"configmap<{cm.name}> has no {key}")
    text = cm.data[key]
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _Unreadable(str(exc)) from None


class ClusterInfo:
    """``ClusterInfoWitchCm``: per node, its device list and NodeD's status."""

    def __init__(self, use_cluster_d: bool = True) -> None:
        self.use_cluster_d = use_cluster_d
        self.devices: dict[str, DeviceInfo] = {}
        self.statuses: dict[str, str] = {}

    def watches(self, cm: ConfigMapView) -> bool:
        """Whether the informer sees ``cm`` (``initClusterCmInformer``: the namespace and label;
        ``initDeviceAndNodeDCmInformer``: the label and ``InformerConfigmapFilter``)."""
        if self.use_cluster_d:
            return cm.namespace == MINDX_DL and cm.labels.get(CLUSTER_CONSUMER) == "true"
        if cm.labels.get(DEVICE_CONSUMER) != "true":
            return False
        return (cm.namespace == KUBE_SYSTEM and cm.name.startswith(DEVICE_INFO_PREFIX)) or (
            cm.namespace == MINDX_DL and cm.name.startswith(NODE_INFO_PREFIX)
        )

    def update(self, cm: ConfigMapView, deleted: bool = False) -> None:
        """An add, update or (``deleted``) delete event for a watched ConfigMap."""
        if not self.watches(cm):
            return
        try:
            if self.use_cluster_d:
                self._cluster(cm, deleted)
            else:
                self._plugin(cm, deleted)
        except _Unreadable:
            pass  # Go logs it and keeps what it had

    def _cluster(self, cm: ConfigMapView, deleted: bool) -> None:
        """``updateConfigMapCluster``: ``dealClusterDeviceInfo``, ``dealClusterNodeInfo``."""
        if cm.name.startswith(CLUSTER_DEVICE_PREFIX):
            raw = _json(cm, cm.name)
            if raw is not None and not isinstance(raw, dict):
                raise _Unreadable("not an object")
            parsed = {
                key.removeprefix(DEVICE_INFO_PREFIX): _device_info(value)
                for key, value in (raw or {}).items()
            }
            for node, info in parsed.items():
                if deleted:
                    self.devices.pop(node, None)
                else:
                    self.devices[node] = info
        if cm.name == CLUSTER_NODE_NAME:
            raw = _json(cm, cm.name)
            if raw is not None and not isinstance(raw, dict):
                raise _Unreadable("not an object")
            statuses = {
                key.removeprefix(NODE_INFO_PREFIX): _node_status(value)
                for key, value in (raw or {}).items()
            }
            self.statuses = {} if deleted else statuses  # the whole map is replaced

    def _plugin(self, cm: ConfigMapView, deleted: bool) -> None:
        """``updateConfigMap``: ``createOrUpdateDeviceInfo``, ``createOrUpdateNodeInfo``."""
        if cm.namespace == KUBE_SYSTEM and cm.name.startswith(DEVICE_INFO_PREFIX):
            node = cm.name.removeprefix(DEVICE_INFO_PREFIX)
            if deleted:
                self.devices.pop(node, None)
                return
            raw = _json(cm, DEVICE_INFO_KEY)
            if raw is None:  # Go dereferences a nil pointer here
                raise _Unreadable("empty device info")
            fields = _fields(raw)
            info = _device_info(fields.get("deviceinfo"))
            pod_id = _integer(fields.get("superpodid"))
            self.devices[node] = DeviceInfo(info.devices, info.update_time, pod_id)
            return
        node = cm.name.removeprefix(NODE_INFO_PREFIX)
        if deleted:
            self.statuses.pop(node, None)
            return
        self.statuses[node] = _node_status(_fields(_json(cm, NODE_INFO_KEY)).get("nodeinfo"))

    def device_info(self, node: str) -> DeviceInfo:
        return self.devices.get(node, DeviceInfo())

    def node_status(self, node: str) -> str:
        """``GetNodeDInfo(...).NodeStatus`` ("" when NodeD reported nothing)."""
        return self.statuses.get(node, "")


def device_type(devices: Mapping[str, str]) -> str:
    """``GetDeviceType``: the first key (Go: in map order; here sorted) naming Ascend910,
    Ascend310P or Ascend310; Ascend910 when none does."""
    for key in sorted(devices):
        for kind in ("Ascend910", "Ascend310P", "Ascend310"):
            if kind in key:
                return kind
    return "Ascend910"


def _listed(devices: Mapping[str, str], key: str) -> list[str]:
    text = devices.get(key, "")
    return text.split(",") if text else []


def _base_chips(text: str | None) -> list[str] | None:
    """``GetNodeDevListFromAnno``: the chips of ``baseDeviceInfos``, vNPUs left out."""
    if text is None:
        return None
    try:
        base = json.loads(text)
    except ValueError:
        return None
    if not isinstance(base, dict) or not all(isinstance(v, dict | None) for v in base.values()):
        return None
    return [name for name in base if len(name.split("-")) <= 2]


def _pods_use(pods: Sequence[NpuPod], kind: str) -> list[str]:
    """``GetActivePodUsedDevFromNode``: the chips the node's running pods name."""
    used: list[str] = []
    for pod in pods:
        if not pod.active or len(pod.name) > 253 or len(pod.namespace) > 63:
            continue
        text = pod.annotations.get(f"huawei.com/{kind}", "")
        if not text or len(text) > _MAX_ANNOTATION:
            continue
        names = text.split(",")
        if len(names) <= _MAX_DEVICES:
            used.extend(names)
    return used


def available(
    info: DeviceInfo,
    base_infos: str | None,
    pods: Sequence[NpuPod],
    self_maintain: bool,
    now: float,
) -> DeviceInfo:
    """``initNodeDeviceInfoByCmMgr``: the node's device list as the session sees it.
    ``base_infos``: the node's ``baseDeviceInfos`` annotation (None: absent). When it cannot be
    read, the free-chip key is left out (Go returns the keys it had copied so far, in map
    order; the others are kept here) and the time is the list's own."""
    kind = device_type(info.devices)
    key = f"huawei.com/{kind}"
    if not self_maintain or key not in info.devices:
        return info
    out = dict(info.devices)
    chips = _base_chips(base_infos)
    if chips is None:
        del out[key]
        return DeviceInfo(out, info.update_time, info.super_pod_id)
    gone = (
        set(_pods_use(pods, kind))
        | set(_listed(info.devices, f"{key}-Unhealthy"))
        | set(_listed(info.devices, f"{key}-Recovering"))
    )
    out[key] = ",".join(sorted(set(chips) - gone))
    return DeviceInfo(out, int(now), info.super_pod_id)
