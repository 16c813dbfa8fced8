"""priority: order jobs and tasks by PriorityClass value; only lower priority may be preempted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from caldera.api.job import Job
from caldera.api.task import Task
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.points import PERMIT

__all__ = ["PriorityPlugin"]


class PriorityPlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "priority"

    def on_session_open(self, ssn: SessionView) -> None:
        ssn.task_order_point.add_key(self.name, lambda t: -t.priority)
        ssn.job_order_point.add_key(self.name, lambda j: -j.priority)

        def preemptable(preemptor: Task, preemptees: Sequence[Task]) -> tuple[list[Task], int]:
            mine = ssn.jobs[preemptor.job]
            victims = []
            for task in preemptees:
                theirs = ssn.jobs[task.job]
                if theirs is not mine:
                    if theirs.priority < mine.priority:
                        victims.append(task)
                elif task.priority < preemptor.priority:
                    victims.append(task)
            return victims, PERMIT

        def starving(job: Job) -> bool:
            return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)

        ssn.preemptable_point.add(self.name, preemptable)
        ssn.job_starving_point.add(self.name, starving)
