"""sla: jobs that waited longer than their SLA go first and are forced through enqueue and gang.

The waiting time comes from the plugin argument ``sla-waiting-time`` or a job's own
``sla-waiting-time`` PodGroup annotation (which wins), both Go durations such as ``1h30m``.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field, field_validator

from caldera.api.job import Job
from caldera.framework.duration import parse_go_duration
from caldera.framework.plugin import Args, Plugin
from caldera.framework.points import ABSTAIN, PERMIT
from caldera.framework.session import Session

__all__ = ["SlaArgs", "SlaPlugin"]

ANNOTATION = "sla-waiting-time"


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

    def on_session_open(self, ssn: Session) -> None:
        default = parse_go_duration(self.args.waiting_time) if self.args.waiting_time else None

        def waiting(job: Job) -> float | None:
            raw = job.annotations.get(ANNOTATION)
            if raw:
                try:
                    return parse_go_duration(raw)
                except ValueError:
                    return default
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
