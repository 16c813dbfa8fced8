"""cdp: cooldown protection; a pod that started recently is not evicted.

A pod annotated (or labelled) ``volcano.sh/cooldown-time: <Go duration>`` is offered to neither
preempt nor reclaim until that long after it started (``status.startTime``; its creation when the
kubelet has not said), as Volcano's cdp plugin protects it. A value that is not a duration
protects nothing and is logged once per pod.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import ClassVar

from caldera.api.task import Task
from caldera.framework.duration import parse_go_duration
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.points import PERMIT

__all__ = ["COOLDOWN_KEY", "CdpPlugin"]

log = logging.getLogger(__name__)
COOLDOWN_KEY = "volcano.sh/cooldown-time"
_warned: set[str] = set()


def _cooldown(task: Task) -> float:
    raw = task.annotations.get(COOLDOWN_KEY) or task.labels.get(COOLDOWN_KEY)
    if not raw:
        return 0.0
    try:
        return max(parse_go_duration(raw), 0.0)
    except ValueError:
        if task.uid not in _warned:
            _warned.add(task.uid)
            log.warning("pod %s: %s: not a duration: %r", task.key, COOLDOWN_KEY, raw)
        return 0.0


class CdpPlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "cdp"

    def on_session_open(self, ssn: SessionView) -> None:
        now = ssn.now

        def cooled(_: Task, candidates: Sequence[Task]) -> tuple[list[Task], int]:
            out = []
            for task in candidates:
                wait = _cooldown(task)
                since = task.started or task.creation
                if not wait or now - since >= wait:
                    out.append(task)
            return out, PERMIT

        ssn.preemptable_point.add(self.name, cooled)
        ssn.reclaimable_point.add(self.name, cooled)
