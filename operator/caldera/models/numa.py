"""Volcano's per-node NUMA topology kind: Numatopology (``nodeinfo.volcano.sh/v1alpha1``).

Volcano's resource exporter writes one per node (named after it): the kubelet's CPU and
topology manager policies, the CPUs each NUMA-aware resource may use (a cpuset list such as
``"0-3,8"``) and, per CPU, its NUMA node, socket and core. The numa-aware plugin reads it. Field
names follow Volcano's ``NumatopoSpec``; a cpuset that does not parse is refused with the field
that holds it, so one bad node is reported and skipped rather than read wrong.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from caldera.models.base import ApiModel, ObjectMeta
from caldera.quantity import QuantityError, parse_quantity

__all__ = ["CPUInfo", "NumatopoSpec", "Numatopology", "ResourceInfo", "parse_cpuset"]

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"


def parse_cpuset(text: str) -> frozenset[int]:
    """Linux's cpuset list format (``"0-3,8,10-11"``; empty: none), as the kubelet writes it."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        match = _RANGE.fullmatch(part)
        if match is None:
            raise ValueError(f"{text!r} is not a cpuset list (e.g. 0-3,8)")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if last < first:
            raise ValueError(f"{text!r}: range {part} runs backwards")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


class ResourceInfo(ApiModel):
    allocatable: str = ""
    """The CPUs (as a cpuset list) this resource may use."""
    capacity: int = 0

    @field_validator("allocatable")
    @classmethod
    def _cpuset(cls, value: str) -> str:
        parse_cpuset(value)
        return value

    @property
    def cpus(self) -> frozenset[int]:
        return parse_cpuset(self.allocatable)


class CPUInfo(ApiModel):
    numa: int = Field(0, ge=0)
    socket: int = Field(0, ge=0)
    core: int = Field(0, ge=0)


class NumatopoSpec(ApiModel):
    policies: dict[str, str] = Field(default_factory=dict)
    res_reserved: dict[str, str] = Field(default_factory=dict)
    numares: dict[str, ResourceInfo] = Field(default_factory=dict)
    cpu_detail: dict[int, CPUInfo] = Field(default_factory=dict)
    """Per CPU id (the API's keys are strings)."""
    pod_allocations: tuple[dict[str, Any], ...] = ()
    """What newer exporters record of each pod's CPUs (kept as written)."""

    @field_validator("res_reserved")
    @classmethod
    def _quantities(cls, value: dict[str, str]) -> dict[str, str]:
        for name, quantity in value.items():
            try:
                parse_quantity(quantity)
            except QuantityError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return value


class Numatopology(ApiModel):
    metadata: ObjectMeta
    spec: NumatopoSpec = Field(default_factory=NumatopoSpec)

    @property
    def cpu_manager_policy(self) -> str:
        return self.spec.policies.get(CPU_MANAGER_POLICY, "")

    @property
    def topology_manager_policy(self) -> str:
        return self.spec.policies.get(TOPOLOGY_MANAGER_POLICY, "")
