"""Why a task fits on no node: per-reason node counts, formatted the way Volcano prints them.

Filters report a rejection mask per reason over all nodes; a node rejected for several reasons
counts once under each (every failing reason is kept, not just the first). The text is Volcano's
``FitErrors.Error()``: ``0/<N> nodes are unavailable: <n> <reason>, ….`` with the
``<n> <reason>`` entries sorted as strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["FitErrors", "histogram"]


def histogram(counts: Mapping[str, int]) -> str:
    """``"<n> <reason>"`` entries sorted as strings and joined (Volcano's sortReasonsHistogram)."""
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items() if n))


@dataclass(slots=True)
class FitErrors:
    total: int
    """How many nodes were considered."""
    counts: dict[str, int] = field(default_factory=dict)
    """Reason → number of nodes rejected for it."""
    message: str = ""
    """A verdict that is not about nodes (a pre-filter error); replaces the histogram."""
    prefix: str = ""

    def error(self) -> str:
        if self.message:
            return self.message
        head = f"{self.prefix}0/{self.total} nodes are unavailable"
        if not self.counts:
            return head
        return f"{head}: {histogram(self.counts)}."
