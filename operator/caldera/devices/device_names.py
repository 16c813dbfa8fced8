"""The resource names of HAMi's device configuration, where a cluster renames them.

HAMi's scheduler reads its device configuration (``--device-config-file``, the chart's
``hami-scheduler-device`` ConfigMap mounted as ``device-config.yaml``) for each vendor's resource
names: ``nvidia.resourceCountName`` and the rest (``pkg/scheduler/config/config.go``: ``Config``,
``LoadConfig``; each vendor's ``*Config`` struct). A cluster whose HAMi advertises
``hami.io/gpu`` instead of ``nvidia.com/gpu`` points ``deviceshare.DeviceConfigFile`` at the same
file.

Caldera's vendors are written with the chart's default names. :class:`DeviceNames` maps a pod's
and a node's resources onto them as deviceshare reads them (:meth:`DeviceNames.inward`): a
configured name becomes the vendor's, and a default name the file gives away is no longer the
vendor's (a pod asking ``nvidia.com/gpu`` there is for NVIDIA's own device plugin), and back
(:meth:`DeviceNames.outward`) for what the rest of the scheduler sees. Only the names are read;
card types and templates of a section stay the chart's, and an entry for a card type Caldera does
not know is passed over with a log line.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

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
from caldera.devices.mthreads import MTHREADS
from caldera.devices.nvidia import MEMORY_PERCENTAGE, NVIDIA, PRIORITY
from caldera.devices.vastai import VASTAI
from caldera.devices.vendor import Vendor

__all__ = ["NO_NAMES", "DeviceNames", "parse_device_config", "read_device_config"]

log = logging.getLogger(__name__)


def _names(vendor: Vendor) -> dict[str, str]:
    """The fields most sections name, with the vendor's defaults."""
    return {
        "resourceCountName": vendor.count_resource,
        "resourceMemoryName": vendor.quota_memory,
        "resourceCoreName": vendor.quota_cores,
    }


SECTIONS: dict[str, dict[str, str]] = {
    "nvidia": {
        **_names(NVIDIA),
        "resourceMemoryPercentageName": MEMORY_PERCENTAGE,
        "resourcePriorityName": PRIORITY,
    },
    "cambricon": _names(CAMBRICON_MLU),
    "hygon": _names(HYGON_DCU),
    "metax": {
        "resourceCountName": METAX_GPU.count_resource,
        "resourceVCountName": METAX_SGPU.count_resource,
        "resourceVMemoryName": METAX_SGPU.quota_memory,
        "resourceVCoreName": METAX_SGPU.quota_cores,
    },
    "enflame": {
        "resourceNameGCU": ENFLAME_GCU.count_resource,
        "resourceNameDRSGCU": ENFLAME.count_resource,
        "resourceNameGCUMemory": ENFLAME.quota_memory,
        "resourceNameGCUCore": ENFLAME.quota_cores,
    },
    "mthreads": _names(MTHREADS),
    "kunlun": {
        "resourceCountName": KUNLUN_XPU.count_resource,
        "resourceVCountName": KUNLUN_VXPU.count_resource,
        "resourceVMemoryName": KUNLUN_VXPU.quota_memory,
    },
    "awsneuron": _names(AWS_NEURON),
    "amd": _names(AMD_GPU),
    "vastai": _names(VASTAI),
    "biren": _names(BIREN),
}
"""Per section of HAMi's ``Config``, each resource-name field and the name Caldera's vendor
uses (the chart's default); an empty default is a name the vendor does not read."""
LISTS: dict[str, tuple[str, dict[str, dict[str, str]]]] = {
    "iluvatars": ("commonWord", {v.name: _names(v) for v in ILUVATAR}),
    "vnpus": (
        "commonWord",
        {
            v.name: {
                "resourceName": v.count_resource,
                "resourceMemoryName": v.quota_memory,
                "resourceCoreName": v.quota_cores,
            }
            for v in ASCEND
        },
    ),
}
"""The sections holding one entry per card type, matched by ``commonWord``: the fields and
defaults of each type Caldera knows."""


@dataclass(frozen=True, slots=True)
class DeviceNames:
    """Each renamed resource: the vendor's default name and the configured one."""

    renamed: tuple[tuple[str, str], ...] = ()
    _out: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)
    _in: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_out", dict(self.renamed))
        object.__setattr__(self, "_in", {new: old for old, new in self.renamed})

    def __bool__(self) -> bool:
        return bool(self.renamed)

    def outward(self, name: str) -> str:
        """The name the cluster uses for the vendor's ``name``."""
        return self._out.get(name, name)

    def outward_all(self, names: Iterable[str]) -> frozenset[str]:
        return frozenset(self.outward(n) for n in names)

    def inward(self, resources: Mapping[str, float]) -> Mapping[str, float]:
        """``resources`` as the vendors read them: configured names under the vendor's, and a
        default name configured away left out (it is some other device plugin's)."""
        if not self.renamed or not any(name in self._in or name in self._out for name in resources):
            return resources
        out: dict[str, float] = {}
        for name, value in resources.items():
            if name in self._in:
                out[self._in[name]] = value
            elif name not in self._out:
                out[name] = value
        return out


NO_NAMES = DeviceNames()


class _Bad(ValueError):
    pass


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Bad(f"{key}: expected a mapping, got {value!r}")
    return value


def _renames(
    entry: Mapping[str, Any], fields: Mapping[str, str], where: str
) -> list[tuple[str, str]]:
    out = []
    for key, default in fields.items():
        value = entry.get(key)
        if value is None or value == "" or not default:
            continue  # unset: the default stands (HAMi would leave the device nameless)
        if not isinstance(value, str) or any(c.isspace() for c in value):
            raise _Bad(f"{where}.{key}: expected a resource name, got {value!r}")
        if value != default:
            out.append((default, value))
    return out


def parse_device_config(text: str) -> DeviceNames:
    """The resource names of a ``device-config.yaml``; raises ValueError naming the field at
    fault."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _Bad(f"not YAML: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise _Bad(f"expected a mapping of device sections, got {doc!r}")
    renamed: list[tuple[str, str]] = []
    for key, fields in SECTIONS.items():
        renamed += _renames(_section(doc, key), fields, key)
    for key, (word, known) in LISTS.items():
        entries = doc.get(key)
        if key == "vnpus" and isinstance(entries, dict):
            entries = entries.get("configs")  # HAMi's {hamiVnpuCore, configs} wrapper
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise _Bad(f"{key}: expected a list, got {entries!r}")
        for i, entry in enumerate(entries):
            where = f"{key}[{i}]"
            if not isinstance(entry, dict):
                raise _Bad(f"{where}: expected a mapping, got {entry!r}")
            card_type = str(entry.get(word, ""))
            if card_type not in known:
                log.warning(
                    "%s: card type %r is not one Caldera shares; passed over", where, card_type
                )
                continue
            renamed += _renames(entry, known[card_type], where)
    taken: dict[str, str] = {}
    for default, name in renamed:
        if taken.setdefault(name, default) != default:
            raise _Bad(f"{name!r} is configured for both {taken[name]!r} and {default!r}")
    return DeviceNames(tuple(sorted(renamed)))


@functools.lru_cache(maxsize=8)
def _read(path: str, stamp: float) -> DeviceNames:
    del stamp
    with open(path, encoding="utf-8") as f:
        return parse_device_config(f.read())


def read_device_config(path: str) -> DeviceNames:
    """:func:`parse_device_config` of the file at ``path`` (read again once it has changed)."""
    try:
        stamp = os.stat(path).st_mtime
        return _read(path, stamp)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
