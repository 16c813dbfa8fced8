"""The deviceshare node score: HAMi's, or Volcano's for the vendors scored its way.

HAMi ranks a node by its usage score (§5.1, each vendor's table summed), plus what the pod's
vendors' own ``ScoreNode`` add (HAMi's ``OverrideScore``), spread over 0-100 across the
candidates and turned over for the spread policy. Volcano's ``getDeviceScore`` (its Ascend
vNPUs: :attr:`~caldera.devices.vendor.Vendor.score_alone`) takes the ``ScoreNode`` alone, summed
over the pod's requests and rounded. Either is multiplied by ``deviceshare.ScheduleWeight``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from caldera.api.task import Task
from caldera.devices.hami import node_policy
from caldera.devices.vendor import ScoreInput
from caldera.plugins.deviceshare.state import MAX_NODE_SCORE, DeviceState

__all__ = ["MAX_SCORE", "device_scores", "usage_scores", "vendor_scores"]

MAX_SCORE = 100.0
Scores = npt.NDArray[np.float64]


def device_scores(
    state: DeviceState, task: Task, rows: npt.NDArray[np.intp], policy: str, weight: int
) -> Scores | float:
    """The score of each of ``rows`` for ``task`` (``policy``: ``deviceshare.SchedulePolicy``),
    times ``weight``; 0 for a pod asking no device."""
    needs = state.needs(task)
    if isinstance(needs, str) or not needs:
        return 0.0
    if all(state.vendors[n.vendor].score_alone for n in needs):
        # Volcano's getDeviceScore: the ScoreNodes summed and rounded, times the weight
        alone = vendor_scores(state, task, rows, policy)
        return 0.0 if alone is None else np.floor(alone + 0.5) * weight
    base = usage_scores(state, rows) / state.registered  # HAMi's usage score, 0-30
    chosen = node_policy(task.annotations, policy or "binpack")
    extra = vendor_scores(state, task, rows, chosen)
    if extra is not None and extra.any():
        # HAMi ranks by usage score + the vendors' ScoreNode (binpack: highest first,
        # spread: lowest); spread over 0-100 across the candidates, that order kept
        raw = base + extra
        low, high = float(raw.min()), float(raw.max())
        scores = (raw - low) * (MAX_SCORE / (high - low)) if high > low else raw * 0.0
    else:
        scores = base * (MAX_SCORE / MAX_NODE_SCORE)
    if chosen == "spread":
        scores = MAX_SCORE - scores
    out: Scores = scores * weight
    return out


def usage_scores(state: DeviceState, rows: npt.NDArray[np.intp]) -> Scores:
    """§5.1 summed over the vendors, on ``rows``."""
    total = np.zeros(len(rows), dtype=np.float64)
    for table in state.tables:
        if table.width:
            total += table.node_scores(rows)
    return total


def vendor_scores(
    state: DeviceState, task: Task, rows: npt.NDArray[np.intp], policy: str
) -> Scores | None:
    """What the pod's vendors' own ``ScoreNode`` add on ``rows``, from the cards the pod would
    get on each; None when none of its vendors has one."""
    needs = state.needs(task)
    if isinstance(needs, str):
        return None
    scored = [n for n in needs if state.vendors[n.vendor].score_node is not None]
    if not scored:
        return None
    out = np.zeros(len(rows), dtype=np.float64)
    for need in scored:
        vendor, table = state.vendors[need.vendor], state.tables[need.vendor]
        assert vendor.score_node is not None
        for i, row in enumerate(rows.tolist()):
            before = table.uses(row)
            fit = state.fit(need, row, before)
            if fit.grants is None:
                continue
            seen = ScoreInput(
                state.nodes.annotations[row],
                table.cards[row],
                before,
                fit.grants,
                state.node_options(need, row),
                policy,
            )
            out[i] += vendor.score_node(seen)
    return out
