"""A queue as the scheduler sees it: its spec in engine units plus what the API last recorded."""

from __future__ import annotations

from dataclasses import dataclass, field

from caldera.api.resources import Vector
from caldera.models.volcano import QueueAffinity

__all__ = ["Queue"]


@dataclass(slots=True, eq=False)
class Queue:
    name: str
    uid: str
    weight: int
    capability: Vector
    """Hard cap; +inf in every dimension the spec leaves unset."""
    guarantee: Vector
    deserved_spec: Vector | None
    """``spec.deserved`` (+inf where it names no amount); None when the spec has none."""
    parent: str
    state: str
    reclaimable: bool
    priority: int
    creation: float
    status_allocated: dict[str, float]
    """``status.allocated`` as read from the API, to write only on change."""
    annotations: dict[str, str] = field(default_factory=dict)
    """Its annotations (the hierarchical drf's ``volcano.sh/hierarchy``)."""
    affinity: QueueAffinity | None = None
    """``spec.affinity``: the node groups its pods may use (the nodegroup plugin)."""

    @property
    def is_open(self) -> bool:
        return self.state == "Open"

    @property
    def closed_reason(self) -> str:
        """Why a queue that is not open takes no new pods."""
        return f"queue {self.name} is {self.state or 'not open'}: it takes no new pods"
