"""MindCluster's init-params and ConfigMaps, as Volcano's port reads them.

Tables built from the branches of ``init_policy.go`` (``getConfigurationByKey``,
``initDynamicParameters``, ``initStaticParameters``) and ``third_party/mindcluster/common/k8s``
(``cmmgr.go``, ``configmap.go``) at ed72c7c8; Volcano has no test of its own for them. Each row
names the Go function and branch.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from builders import MINDCLUSTER_CONFIG_043
from caldera.devices.mindcluster_chip import NpuPod, read_pod
from caldera.devices.mindcluster_info import (
    ClusterInfo,
    ConfigMapView,
    DeviceInfo,
    InitParams,
    available,
)
from caldera.framework.tolerance import first_document

PARAMS = {
    "getConfigurationByKey: no init-params": (None, InitParams(False, True, True)),
    "getPresetVirtualDeviceConfig: the string false": (
        {"presetVirtualDevice": "false", "grace-over-time": "900"},
        InitParams(False, True, True),
    ),
    "getPresetVirtualDeviceConfig: a YAML true is the string true": (
        {"presetVirtualDevice": True},
        InitParams(True, True, True),
    ),
    "getUseClusterDConfig and getSelfMaintainAvailCard: only 'true' is true": (
        {"useClusterInfoManager": "yes", "self-maintain-available-card": "True"},
        InitParams(False, False, False),
    ),
    "initConfsFromSsn: a map value makes the entry unreadable": (
        {"useClusterInfoManager": "false", "nested": {"a": 1}},
        InitParams(False, True, True),
    ),
}


@pytest.mark.parametrize(("arguments", "want"), PARAMS.values(), ids=PARAMS.keys())
def test_init_params_are_read_as_strings_with_volcanos_defaults(
    arguments: dict[str, Any] | None, want: InitParams
) -> None:
    """``initDynamicParameters`` and ``initStaticParameters``."""
    assert InitParams.read(arguments) == want


def test_real_config_043_ends_before_its_init_params() -> None:
    """Config 043 puts ``init-params`` after a ``...`` line: Volcano's decoder stops there, so
    every default holds (the same values the line asks for); written inside the document, the
    entry is read."""
    policy = first_document(MINDCLUSTER_CONFIG_043, "043")
    assert policy["configurations"] is None
    assert policy["tiers"][0]["plugins"][1]["arguments"] == {
        "deviceshare.AscendMindClusterVNPUEnable": True
    }
    assert InitParams.from_policy(policy["configurations"]) == InitParams(False, True, True)
    whole = first_document(MINDCLUSTER_CONFIG_043.replace("\n...\n", "\n"), "043")
    assert whole["configurations"][0]["name"] == "init-params"
    assert InitParams.from_policy(whole["configurations"]) == InitParams(False, True, True)
    wanted = [{"name": "init-params", "arguments": {"useClusterInfoManager": "false"}}]
    assert InitParams.from_policy(wanted) == InitParams(False, False, True)


def cm(namespace: str, name: str, data: dict[str, Any], consumer: str = "") -> ConfigMapView:
    labels = {consumer: "true"} if consumer else {}
    text = {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}
    return ConfigMapView(namespace, name, labels, text)


VOLCANO, CIM = "mx-consumer-volcano", "mx-consumer-cim"
WATCHES = {
    "initClusterCmInformer: mindx-dl, labelled for volcano": (
        True,
        cm("mindx-dl", "cluster-info-device-0", {}, VOLCANO),
        True,
    ),
    "initClusterCmInformer: another namespace": (
        True,
        cm("kube-system", "cluster-info-device-0", {}, VOLCANO),
        False,
    ),
    "initClusterCmInformer: no label": (True, cm("mindx-dl", "cluster-info-node-cm", {}), False),
    "InformerConfigmapFilter: the device plugin's device info": (
        False,
        cm("kube-system", "mindx-dl-deviceinfo-n1", {}, CIM),
        True,
    ),
    "InformerConfigmapFilter: NodeD's node info": (
        False,
        cm("mindx-dl", "mindx-dl-nodeinfo-n1", {}, CIM),
        True,
    ),
    "InformerConfigmapFilter: device info outside kube-system": (
        False,
        cm("mindx-dl", "mindx-dl-deviceinfo-n1", {}, CIM),
        False,
    ),
    "initDeviceAndNodeDCmInformer: labelled for volcano only": (
        False,
        cm("kube-system", "mindx-dl-deviceinfo-n1", {}, VOLCANO),
        False,
    ),
}


@pytest.mark.parametrize(("cluster_d", "view", "want"), WATCHES.values(), ids=WATCHES.keys())
def test_the_informer_sees_the_configmaps_of_its_mode(
    cluster_d: bool, view: ConfigMapView, want: bool
) -> None:
    """``InitCmInformer``: ClusterD's ConfigMaps, or the device plugin's and NodeD's."""
    assert ClusterInfo(cluster_d).watches(view) is want


LIST = {"huawei.com/Ascend310P": "Ascend310P-0,Ascend310P-1", "huawei.com/Ascend310P-Unhealthy": ""}


def test_clusterd_configmaps_give_device_lists_and_node_statuses() -> None:
    """``dealClusterDeviceInfo`` (per node, deleted with the ConfigMap) and
    ``dealClusterNodeInfo`` (the whole map replaced, emptied on delete); keys are matched
    case-insensitively; an unreadable ConfigMap changes nothing."""
    info = ClusterInfo(True)
    devices = cm(
        "mindx-dl",
        "cluster-info-device-0",
        {
            "cluster-info-device-0": {
                "mindx-dl-deviceinfo-n1": {"DeviceList": LIST, "UpdateTime": 7, "SuperPodID": 2},
                "mindx-dl-deviceinfo-n2": {"devicelist": {}, "updatetime": 8},
            }
        },
        VOLCANO,
    )
    info.update(devices)
    assert info.device_info("n1") == DeviceInfo(LIST, 7, 2)
    assert info.device_info("n2") == DeviceInfo({}, 8)
    assert info.device_info("n3") == DeviceInfo()
    nodes = {"cluster-info-node-cm": {"mindx-dl-nodeinfo-n1": {"NodeStatus": "PreSeparate"}}}
    info.update(cm("mindx-dl", "cluster-info-node-cm", nodes, VOLCANO))
    assert (info.node_status("n1"), info.node_status("n2")) == ("PreSeparate", "")
    info.update(cm("mindx-dl", "cluster-info-node-cm", {"cluster-info-node-cm": "{"}, VOLCANO))
    assert info.node_status("n1") == "PreSeparate"
    info.update(cm("mindx-dl", "cluster-info-node-cm", nodes, VOLCANO), deleted=True)
    assert info.node_status("n1") == ""
    info.update(devices, deleted=True)
    assert info.devices == {}


def test_device_plugin_configmaps_give_device_lists_and_node_statuses() -> None:
    """``createOrUpdateDeviceInfo`` (``DeviceInfoCfg``), ``createOrUpdateNodeInfo``
    (``NodeInfo``) and their deletes; a missing key or bad JSON is passed over."""
    info = ClusterInfo(False)
    cfg = {"DeviceInfo": {"DeviceList": LIST, "UpdateTime": 9}, "CheckCode": "x", "SuperPodID": 1}
    device = cm("kube-system", "mindx-dl-deviceinfo-n1", {"DeviceInfoCfg": cfg}, CIM)
    info.update(device)
    assert info.device_info("n1") == DeviceInfo(LIST, 9, 1)
    info.update(cm("kube-system", "mindx-dl-deviceinfo-n2", {"Other": "{}"}, CIM))
    bad = {"DeviceInfoCfg": {"DeviceInfo": {"DeviceList": {"a": 1}}}}
    info.update(cm("kube-system", "mindx-dl-deviceinfo-n3", bad, CIM))
    assert set(info.devices) == {"n1"}
    status = {"NodeInfo": {"NodeInfo": {"FaultDevList": None, "NodeStatus": "SubHealthy"}}}
    info.update(cm("mindx-dl", "mindx-dl-nodeinfo-n1", status, CIM))
    assert info.node_status("n1") == "SubHealthy"
    info.update(cm("mindx-dl", "mindx-dl-nodeinfo-n1", status, CIM), deleted=True)
    info.update(device, deleted=True)
    assert (info.devices, info.statuses) == ({}, {})


BASE = json.dumps({f"Ascend310P-{i}": {"IP": ""} for i in range(4)} | {"Ascend310P-1c-100-0": {}})
DEVICES = {
    "huawei.com/Ascend310P": "Ascend310P-3",
    "huawei.com/Ascend310P-Unhealthy": "Ascend310P-1",
    "huawei.com/Ascend310P-Recovering": "Ascend310P-2",
}


def using(chips: str, *, active: bool = True) -> NpuPod:
    return read_pod("u", "p", {}, {"huawei.com/Ascend310P": chips}, [], active=active)


AVAILABLE = {
    "initNodeDeviceInfoByCmMgr: base chips less used, unhealthy, recovering": (
        DEVICES,
        BASE,
        (using("Ascend310P-0"),),
        True,
        ("Ascend310P-3", 1000),
    ),
    "GetActivePodUsedDevFromNode: a finished pod uses nothing": (
        DEVICES,
        BASE,
        (using("Ascend310P-0", active=False),),
        True,
        ("Ascend310P-0,Ascend310P-3", 1000),
    ),
    "selfMaintainAvailCard off: the list as written": (
        DEVICES,
        BASE,
        (),
        False,
        ("Ascend310P-3", 5),
    ),
    "GetNodeDevListFromAnno: no baseDeviceInfos drops the free chips": (
        DEVICES,
        None,
        (),
        True,
        (None, 5),
    ),
    "GetAvailableDevInfo: no free-chip key, nothing worked out": (
        {"huawei.com/Ascend310P-Unhealthy": ""},
        BASE,
        (),
        True,
        (None, 5),
    ),
}


@pytest.mark.parametrize(
    ("devices", "base", "pods", "self_maintain", "want"), AVAILABLE.values(), ids=AVAILABLE.keys()
)
def test_volcano_works_out_the_free_chips_itself(
    devices: dict[str, str],
    base: str | None,
    pods: tuple[NpuPod, ...],
    self_maintain: bool,
    want: tuple[str | None, int],
) -> None:
    """``initNodeDeviceInfoByCmMgr``: the free-chip key and the list's time (now when worked
    out)."""
    got = available(DeviceInfo(devices, 5), base, pods, self_maintain, 1000.0)
    assert (got.devices.get("huawei.com/Ascend310P"), got.update_time) == want
