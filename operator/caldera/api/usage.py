"""Nodes' real load, as a metrics source last measured it: what the ``usage`` plugin reads.

The operator refreshes it in the background (``caldera.outside.metrics``) and hands each session
the last values with the time they were measured; ``caldera simulate`` reads them from a file.
The engine never asks a metrics system itself.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NodeUsage"]


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node's average CPU and memory use over the source's period (Volcano's ``NodeUsage``:
    ``CPUUsageAvg["10m"]``, ``MEMUsageAvg["10m"]``, ``MetricsTime``)."""

    cpu: float
    """Percent of the node's CPU in use (0–100)."""
    memory: float
    """Percent of the node's memory in use (0–100)."""
    measured: float | None
    """When it was measured, in seconds on the session's clock (None: never)."""
