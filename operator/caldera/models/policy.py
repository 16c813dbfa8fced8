"""PodDisruptionBudgets (``policy/v1``): what preemption and reclaim must leave running.

Only what the ``pdb`` plugin reads: the selector, ``minAvailable`` / ``maxUnavailable`` (a count
or a percentage) and the disruption controller's ``status.disruptionsAllowed``.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BeforeValidator, Field

from caldera.models.base import ApiModel, ObjectMeta
from caldera.models.selectors import LabelSelector

__all__ = ["PodDisruptionBudget", "int_or_percent_of"]


def _int_or_percent(value: object) -> object:
    if isinstance(value, str) and not value.endswith("%"):
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"expected an integer or a percentage, not {value!r}") from None
    return value


IntOrPercent = Annotated[int | str, BeforeValidator(_int_or_percent)]


class PodDisruptionBudgetSpec(ApiModel):
    min_available: IntOrPercent | None = None
    max_unavailable: IntOrPercent | None = None
    selector: LabelSelector | None = None


class PodDisruptionBudgetStatus(ApiModel):
    disruptions_allowed: int | None = Field(None, ge=0)


class PodDisruptionBudget(ApiModel):
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)

    def allowed(self, healthy: int) -> int:
        """Disruptions allowed now: the controller's figure when it has written one, else
        computed from the spec as it would (``healthy`` matching pods are running)."""
        if self.status.disruptions_allowed is not None:
            return self.status.disruptions_allowed
        spec = self.spec
        if spec.max_unavailable is not None:
            unavailable = _scaled(spec.max_unavailable, healthy, up=True)
            return max(0, unavailable)
        if spec.min_available is not None:
            return max(0, healthy - _scaled(spec.min_available, healthy, up=True))
        return max(0, healthy - 1)


def int_or_percent_of(text: str, total: int) -> int:
    """A count or a percentage of ``total`` rounded up (Kubernetes' ``GetValueFromIntOrPercent``
    with ``roundUp``); ValueError when it is neither."""
    value = _int_or_percent(text.strip())
    assert isinstance(value, str | int)
    return _scaled(value, total, up=True)


def _scaled(value: int | str, total: int, *, up: bool) -> int:
    if isinstance(value, int):
        return value
    share = float(value[:-1]) * total / 100
    return math.ceil(share) if up else math.floor(share)
