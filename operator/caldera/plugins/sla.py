"""sla: jobs that waited longer than their SLA go first and are forced through enqueue.

Overdue jobs also vote to permit ``JobPipelined``; like every vote, a reject from another plugin in
the same tier (gang's, for a job short of minMember) still wins.

The waiting time comes from the plugin argument ``sla-waiting-time`` or a job's own PodGroup
annotation (which wins): ``volcano.sh/sla-waiting-time``, else the bare ``sla-waiting-time``. Both
are Go durations such as ``1h30m``; a value that does not parse or is not positive counts as unset.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field, field_validator

from caldera.api.job import Job
from caldera.framework.duration import parse_go_duration
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.points import ABSTAIN, PERMIT

__all__ = ["SlaArgs", "SlaPlugin"]

ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")
"""PodGroup annotations read in this order (Volcano's ``JobWaitingTime`` keys)."""


def _positive(raw: str) -> float | None:
    try:
        value = parse_go_duration(raw)
    except ValueError:
        return None
    return value if value > 0 else None


class SlaArgs(Args):
    waiting_time: str | None = Field(None, alias="sla-waiting-time")

    @field_validator("waiting_time")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_go_duration(value)
        return value


class SlaPlugin(Plugin[SlaArgs]):
    name: ClassVar[str] = "sla"
    Args = SlaArgs

    def on_session_open(self, ssn: SessionView) -> None:
        default = _positive(self.args.waiting_time) if self.args.waiting_time else None

        def waiting(job: Job) -> float | None:
            for key in ANNOTATIONS:
                raw = job.annotations.get(key)
                if raw is not None:
                    value = _positive(raw)
                    if value is not None:
                        return value
            return default

        def deadline(job: Job) -> float:
            wait = waiting(job)
            return math.inf if wait is None else job.creation + wait

        def overdue(job: Job) -> int:
            wait = waiting(job)
            if wait is None or ssn.now - job.creation < wait:
                return ABSTAIN
            return PERMIT

        ssn.job_order_point.add_key(self.name, deadline)
        ssn.job_enqueueable_point.add(self.name, overdue)
        ssn.job_pipelined_point.add(self.name, overdue)
