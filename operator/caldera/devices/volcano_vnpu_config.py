"""The device ConfigMap as Volcano's scheduler reads it for HAMi's Ascend vNPUs.

Volcano's ``pkg/scheduler/api/devices/config`` (``config.go``, ``vnpu.go``, at ed72c7c8), the
``vnpus`` part; the ``nvidia`` part is Volcano's vGPU's and not read here:

- where (``InitDevicesConfig``, ``loadConfigFromCM``): the ConfigMap named by
  ``deviceshare.KnownGeometriesCMName`` in ``deviceshare.KnownGeometriesCMNamespace``, its
  ``device-config.yaml`` key. A ConfigMap that is absent, lacks the key or does not parse gives
  ``GetDefaultDevicesConfig``: the Ascend 310P alone, ``hamiVnpuCore`` off;
- the ``vnpus`` section (``VNPUsConfig.UnmarshalYAML``): HAMi's wrapper ``{hamiVnpuCore,
  configs}``, or the older bare list of configs (``hamiVnpuCore`` then off);
- one entry (``VNPUConfig``, ``Template``): ``commonWord``, ``chipName``, ``resourceName``,
  ``resourceMemoryName``, ``memoryAllocatable``, ``memoryCapacity``, ``aiCore``, ``aiCPU`` and
  the ``templates``, sorted by memory (``InitDevices``). Missing fields are Go's zero values and
  unknown ones are ignored, as ``yaml.v2`` reads them; a value of the wrong type spoils the whole
  file, which then gives the default.

The card types are HAMi's :class:`~caldera.devices.ascend.VnpuConfig` (its templates and
``trimMemory``); what Volcano does differently: the resource names are the entry's own, not
derived from the common word, and there is no memory factor (memory is taken as asked).

Volcano reads the ConfigMap once, when the scheduler starts; Caldera reads it each session from
what the cluster holds, so an edit takes effect without a restart.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from caldera.devices.ascend import DEFAULT_CONFIGS, Template, VnpuConfig

__all__ = [
    "CHART_TYPES",
    "CONFIG_KEY",
    "DEFAULT_CONFIG",
    "DevicesConfig",
    "VnpuType",
    "device_config",
    "parse_devices_config",
]

log = logging.getLogger(__name__)

CONFIG_KEY = "device-config.yaml"
"""The ConfigMap key holding the device configuration (``deviceConfigFileName``)."""


@dataclass(frozen=True, slots=True)
class VnpuType:
    """One ``vnpus`` entry (``VNPUConfig``): HAMi's card type and the resource names it is asked
    by."""

    npu: VnpuConfig
    resource_name: str
    resource_memory_name: str

    @property
    def common_word(self) -> str:
        return self.npu.common_word

    @property
    def resource_core_name(self) -> str:
        """``ResourceReqs``: the count's name and ``-core`` (AI cores, or percent in a soft
        split)."""
        return f"{self.resource_name}-core"


@dataclass(frozen=True, slots=True)
class DevicesConfig:
    """The ``vnpus`` section (``VNPUsConfig``)."""

    types: tuple[VnpuType, ...]
    hami_vnpu_core: bool = False
    """Whether a node that does not say (its ``hami-vnpu-core`` annotation) can be soft split."""


def _volcano_type(npu: VnpuConfig) -> VnpuType:
    """A card type of HAMi's chart under the resource names HAMi's device plugin advertises."""
    return VnpuType(
        dataclasses.replace(npu, memory_factor=1, super_pod=False),
        f"huawei.com/{npu.common_word}",
        f"huawei.com/{npu.common_word}-memory",
    )


CHART_TYPES: tuple[VnpuType, ...] = tuple(_volcano_type(c) for c in DEFAULT_CONFIGS)
"""The card types of HAMi's chart ConfigMap (``vnpus.configs``), the resource names Volcano's
user guide lists for them."""
DEFAULT_CONFIG = DevicesConfig(tuple(t for t in CHART_TYPES if t.common_word == "Ascend310P"))
"""``GetDefaultDevicesConfig``: the 310P alone, the same numbers as HAMi's chart gives it."""


class _Unreadable(ValueError):
    """The file does not read as Volcano's ``Config`` (``yaml.Unmarshal`` fails)."""


def _integer(entry: Mapping[str, Any], key: str, where: str) -> int:
    """An integer field; ``yaml.v2`` also takes a float into one, truncated."""
    value = entry.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Unreadable(f"{where}.{key}: expected an integer, got {value!r}")
    return int(value)


def _text(entry: Mapping[str, Any], key: str, where: str) -> str:
    """A string field; ``yaml.v2`` takes any scalar into one as written."""
    value = entry.get(key, "")
    if value is None:
        return ""
    if isinstance(value, dict | list):
        raise _Unreadable(f"{where}.{key}: expected a string, got {value!r}")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Unreadable(f"{where}: expected a mapping, got {value!r}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Unreadable(f"{where}: expected a list, got {value!r}")
    return value


def _template(raw: Any, where: str) -> Template:
    entry = _mapping(raw, where)
    return Template(
        _text(entry, "name", where),
        _integer(entry, "memory", where),
        _integer(entry, "aiCore", where),
        _integer(entry, "aiCPU", where),
    )


def _vnpu_type(raw: Any, where: str) -> VnpuType:
    entry = _mapping(raw, where)
    templates = [
        _template(t, f"{where}.templates[{i}]")
        for i, t in enumerate(_list(entry.get("templates"), f"{where}.templates"))
    ]
    npu = VnpuConfig(
        chip_name=_text(entry, "chipName", where),
        common_word=_text(entry, "commonWord", where),
        memory_allocatable=_integer(entry, "memoryAllocatable", where),
        memory_capacity=_integer(entry, "memoryCapacity", where),
        memory_factor=1,
        ai_core=_integer(entry, "aiCore", where),
        ai_cpu=_integer(entry, "aiCPU", where),
        templates=tuple(sorted(templates, key=lambda t: t.memory)),  # InitDevices
    )
    return VnpuType(
        npu, _text(entry, "resourceName", where), _text(entry, "resourceMemoryName", where)
    )


def parse_devices_config(text: str) -> DevicesConfig:
    """The ``vnpus`` section of ``device-config.yaml`` (``VNPUsConfig.UnmarshalYAML``); raises
    ValueError, naming the field, where ``yaml.Unmarshal`` would fail."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _Unreadable(f"not YAML: {exc}") from None
    vnpus = _mapping(doc, "the document").get("vnpus")
    if isinstance(vnpus, list):  # the older format: the configs alone
        raw, core = vnpus, False
    else:
        wrapper = _mapping(vnpus, "vnpus")
        raw = _list(wrapper.get("configs"), "vnpus.configs")
        core = wrapper.get("hamiVnpuCore", False)
        if core is None:
            core = False
        if not isinstance(core, bool):
            raise _Unreadable(f"vnpus.hamiVnpuCore: expected true or false, got {core!r}")
    types = tuple(_vnpu_type(entry, f"vnpus.configs[{i}]") for i, entry in enumerate(raw))
    return DevicesConfig(types, core)


@functools.lru_cache(maxsize=16)
def _parsed(text: str) -> DevicesConfig | str:
    try:
        return parse_devices_config(text)
    except ValueError as exc:
        return str(exc)


def device_config(data: Mapping[str, str] | None, where: str = "") -> DevicesConfig:
    """``InitDevicesConfig``: the configuration in the device ConfigMap's ``data`` (None: there
    is no such ConfigMap), or the default when it cannot be read. ``where`` names the ConfigMap
    in the log line saying so."""
    if data is None:
        log.debug("device ConfigMap %s not found: the default vNPU configuration", where)
        return DEFAULT_CONFIG
    text = data.get(CONFIG_KEY)
    if text is None:
        log.debug("device ConfigMap %s lacks %s: the default vNPU configuration", where, CONFIG_KEY)
        return DEFAULT_CONFIG
    parsed = _parsed(text)
    if isinstance(parsed, str):
        log.warning("device ConfigMap %s: %s: the default vNPU configuration", where, parsed)
        return DEFAULT_CONFIG
    return parsed
