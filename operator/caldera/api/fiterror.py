"""Why a task fits on no node: per-reason node counts, in kube-scheduler's and Volcano's words.

Each node counts once under each reason of the first check that failed it, as Volcano's
``FitErrors`` counts (:func:`caldera.framework.placement.fit_errors` says which reasons those
are). The pod's message, its PodGroup's condition, ``simulate`` and ``explain`` all read these
counts, so they agree. Two texts are made from them, with the ``<n> <reason>`` entries sorted as
strings in both:

- :meth:`FitErrors.available`, kube-scheduler's ``FitError``, for the pod's ``PodScheduled``
  condition and event (what ``kubectl describe pod`` users know): ``0/<N> nodes are available:
  <n> <reason>, ….`` — or ``0/<N> nodes are available: <pre-filter message>.``;
- :meth:`FitErrors.error`, Volcano's ``FitErrors.Error()``, inside the PodGroup's Unschedulable
  condition: ``0/<N> nodes are available: <n> <reason>, ….`` (Volcano writes "unavailable" here,
  which next to the pod's "0/<N> nodes are available" reads as a contradiction: Caldera uses the
  pod's wording in both).
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
    plain: bool = False
    """``message`` is not about nodes (a queue share, a skipped role): shown as it is."""
    nodes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Node → the (filter, reason) pairs counted against it (kept for the pod ``caldera
    explain`` traces)."""

    def available(self) -> str:
        """kube-scheduler's text: ``0/N nodes are available: …``."""
        if self.plain:
            return self.message
        head = f"{self.prefix}0/{self.total} nodes are available"
        if self.message:
            return f"{head}: {self.message.rstrip('.')}."
        if not self.counts:
            return f"{head}."
        return f"{head}: {histogram(self.counts)}."

    def error(self) -> str:
        if self.message:
            return self.message
        head = f"{self.prefix}0/{self.total} nodes are available"
        if not self.counts:
            return head
        return f"{head}: {histogram(self.counts)}."
