"""HAMi's device configuration file, read for the resource names it gives each vendor
(``pkg/scheduler/config/config.go``: ``Config``, ``LoadConfig``, each vendor's ``*Config``):
the chart's own file renames nothing, a renamed field maps both ways, and a field of the wrong
shape is refused naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from caldera.devices.device_names import (
    NO_NAMES,
    DeviceNames,
    parse_device_config,
    read_device_config,
)

CHART = """\
nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  defaultMemory: 0
cambricon:
  resourceCountName: cambricon.com/vmlu
  resourceMemoryName: cambricon.com/mlu.smlu.vmemory
  resourceCoreName: cambricon.com/mlu.smlu.vcore
metax:
  resourceCountName: "metax-tech.com/gpu"
  resourceVCountName: metax-tech.com/sgpu
  resourceVMemoryName: metax-tech.com/vmemory
  resourceVCoreName: metax-tech.com/vcore
  sgpuTopologyAware: false
enflame:
  resourceNameGCU: "enflame.com/gcu"
  resourceNameDRSGCU: enflame.com/drs-gcu
  resourceNameGCUMemory: enflame.com/gcu-memory
  resourceNameGCUCore: enflame.com/gcu-core
iluvatars:
- chipName: BI-V150
  commonWord: BI-V150
  resourceCountName: iluvatar.ai/BI-V150-vgpu
  resourceMemoryName: iluvatar.ai/BI-V150.vMem
  resourceCoreName: iluvatar.ai/BI-V150.vCore
vnpus:
  hamiVnpuCore: false
  configs:
  - chipName: 310P3
    commonWord: Ascend310P
    resourceName: huawei.com/Ascend310P
    resourceMemoryName: huawei.com/Ascend310P-memory
    resourceCoreName: huawei.com/Ascend310P-core
"""


def test_the_charts_own_file_renames_nothing() -> None:
    assert parse_device_config(CHART) == NO_NAMES
    assert not parse_device_config("")


RENAMES = {
    "the NVIDIA count and memory": (
        "nvidia:\n  resourceCountName: hami.io/gpu\n  resourceMemoryName: hami.io/gpumem\n",
        {"nvidia.com/gpu": "hami.io/gpu", "nvidia.com/gpumem": "hami.io/gpumem"},
    ),
    "MetaX's sGPU count (resourceVCountName)": (
        "metax:\n  resourceVCountName: metax-tech.com/vgpu\n",
        {"metax-tech.com/sgpu": "metax-tech.com/vgpu"},
    ),
    "Enflame's DRS count (resourceNameDRSGCU)": (
        "enflame:\n  resourceNameDRSGCU: enflame.com/shared-gcu\n",
        {"enflame.com/drs-gcu": "enflame.com/shared-gcu"},
    ),
    "an Iluvatar chip, by its commonWord": (
        "iluvatars:\n- {commonWord: MR-V100, resourceCountName: iluvatar.ai/vgpu}\n",
        {"iluvatar.ai/MR-V100-vgpu": "iluvatar.ai/vgpu"},
    ),
    "an Ascend card type in HAMi's vnpus wrapper": (
        "vnpus:\n  configs:\n  - {commonWord: Ascend910B3, resourceName: huawei.com/npu-b3}\n",
        {"huawei.com/Ascend910B3": "huawei.com/npu-b3"},
    ),
    "an Ascend card type in the older bare list": (
        "vnpus:\n- {commonWord: Ascend310P, resourceMemoryName: huawei.com/310p-mem}\n",
        {"huawei.com/Ascend310P-memory": "huawei.com/310p-mem"},
    ),
    "a card type Caldera does not know, passed over": (
        "vnpus:\n- {commonWord: Ascend950, resourceName: huawei.com/Ascend950x}\n",
        {},
    ),
    "a name left empty keeps the default": ("amd:\n  resourceCountName: ''\n", {}),
}


@pytest.mark.parametrize(("text", "renamed"), RENAMES.values(), ids=RENAMES.keys())
def test_a_renamed_field_maps_the_vendors_name(text: str, renamed: dict[str, str]) -> None:
    names = parse_device_config(text)
    assert dict(names.renamed) == renamed
    for default, configured in renamed.items():
        assert names.outward(default) == configured
        assert names.inward({configured: 2.0}) == {default: 2.0}


def test_a_default_name_configured_away_is_no_longer_the_vendors() -> None:
    """With ``hami.io/gpu`` HAMi's, a pod's ``nvidia.com/gpu`` is some other device plugin's:
    deviceshare does not see it; other resources pass untouched."""
    names = DeviceNames((("nvidia.com/gpu", "hami.io/gpu"),))
    asked = {"nvidia.com/gpu": 1.0, "hami.io/gpu": 2.0, "cpu": 4.0}
    assert names.inward(asked) == {"nvidia.com/gpu": 2.0, "cpu": 4.0}
    plain = {"cpu": 1.0}
    assert names.inward(plain) is plain


ERRORS = {
    "a section that is not a mapping": ("nvidia: [a]\n", "nvidia: expected a mapping"),
    "a name that is not a string": (
        "nvidia:\n  resourceCountName: 5\n",
        "nvidia.resourceCountName: expected a resource name, got 5",
    ),
    "a name with a space": (
        "cambricon:\n  resourceMemoryName: 'a b'\n",
        "cambricon.resourceMemoryName: expected a resource name",
    ),
    "a list section that is not a list": ("iluvatars: {a: 1}\n", "iluvatars: expected a list"),
    "an entry that is not a mapping": ("iluvatars: [x]\n", "iluvatars[0]: expected a mapping"),
    "one name for two resources": (
        "amd:\n  resourceCountName: x.io/gpu\nbiren:\n  resourceCountName: x.io/gpu\n",
        "'x.io/gpu' is configured for both",
    ),
    "not YAML": ("nvidia: [\n", "not YAML"),
    "not a mapping of sections": ("- nvidia\n", "expected a mapping of device sections"),
}


@pytest.mark.parametrize(("text", "says"), ERRORS.values(), ids=ERRORS.keys())
def test_a_bad_file_is_refused_naming_the_field(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_device_config(text)
    assert says in str(caught.value)


def test_the_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "device-config.yaml"
    path.write_text("biren:\n  resourceCountName: x.io/br\n")
    assert dict(read_device_config(str(path)).renamed) == {"birentech.com/gpu": "x.io/br"}
    path.write_text("biren:\n  resourceCountName: y.io/br\n")
    import os

    os.utime(path, (1e9, 2e9))
    assert dict(read_device_config(str(path)).renamed) == {"birentech.com/gpu": "y.io/br"}
    with pytest.raises(ValueError, match="cannot read"):
        read_device_config(str(tmp_path / "missing.yaml"))
