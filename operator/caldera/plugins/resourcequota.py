"""resourcequota: a job is admitted only while its namespace's ResourceQuotas have room for it.

Follows Volcano's ``resourcequota`` plugin (``pkg/scheduler/plugins/resourcequota``, the
``JobEnqueueableFn`` registered in ``OnSessionOpen``): for each ResourceQuota of the job's
namespace, the PodGroup's ``minResources`` masked to the quota's ``hard`` resource names, plus the
quota's ``used`` and what jobs of the same namespace were admitted with earlier in this session,
must stay within ``hard``. Otherwise the job stays Pending, with Volcano's event text
``resource quota insufficient, requested: …, used: …, limited: …`` naming only the exceeded
resources. A job without ``minResources``, and a namespace without quotas, pass.

Resource names compare exactly, as Kubernetes' quota helpers do, against minResources as the
PodGroup writes it: Volcano's controllers write it in quota terms (``cpu``, ``requests.cpu``,
``limits.cpu``, ``count/pods`` …). Where it gives only a plain name (a PodGroup written by hand,
or the in-memory group of a bare pod, whose minResources are its requests), that name also
counts as its ``requests.`` spelling, as Kubernetes' pod quota usage lists both; limits cannot
be derived from requests, so a quota on ``limits.*`` gates only jobs whose minResources name
``limits.*``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from caldera.api.job import Job
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.points import PERMIT, REJECT
from caldera.quantity import format_resource

__all__ = ["ResourceQuotaPlugin", "quota_request"]

_QUOTA_PREFIXES = ("requests.", "limits.")
_NOT_REQUESTS = frozenset({"pods", "count/pods"})


def quota_request(requested: Mapping[str, float]) -> dict[str, float]:
    """``requested`` with each plain resource also under its ``requests.`` name (unless given),
    as Kubernetes' pod quota usage lists both."""
    out = dict(requested)
    for name, value in requested.items():
        if name not in _NOT_REQUESTS and not name.startswith(_QUOTA_PREFIXES):
            out.setdefault(f"requests.{name}", value)
    return out


def go_map(values: Mapping[str, float], names: Sequence[str]) -> str:
    """A resource list as Go prints a map (sorted keys), with Kubernetes quantities."""
    items = " ".join(f"{n}:{format_resource(n, values[n])}" for n in names if n in values)
    return f"map[{items}]"


class ResourceQuotaPlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "resourcequota"

    def on_session_open(self, ssn: SessionView) -> None:
        space = ssn.space
        statuses = ssn.snapshot.quota_statuses
        admitted: dict[str, dict[str, float]] = {}
        """Per namespace, the minResources of the jobs admitted so far this session."""

        def enqueueable(job: Job) -> int:
            if job.min_resources is None:
                return PERMIT
            written = job.min_resource_list
            if written is None:
                written = space.to_dict(job.min_resources, skip_zero=True)
            requested = quota_request(written)
            before = admitted.get(job.namespace, {})
            for quota in statuses.get(job.namespace, ()):
                asked = {n: v for n, v in requested.items() if n in quota.hard}
                exceeded = sorted(
                    n
                    for n, v in asked.items()
                    if quota.used.get(n, 0.0) + before.get(n, 0.0) + v > quota.hard[n]
                )
                if exceeded:
                    msg = (
                        f"resource quota insufficient, requested: {go_map(asked, exceeded)}, "
                        f"used: {go_map(quota.used, exceeded)}, "
                        f"limited: {go_map(quota.hard, exceeded)}"
                    )
                    job.fit_error = msg
                    ssn.record_event(job, "Normal", "Unschedulable", msg)
                    return REJECT
            total = admitted.setdefault(job.namespace, {})
            for n, v in requested.items():
                total[n] = total.get(n, 0.0) + v
            return PERMIT

        ssn.job_enqueueable_point.add(self.name, enqueueable)
