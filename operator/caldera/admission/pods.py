"""``/pods/validate`` and ``/pods/mutate``, for pods whose ``schedulerName`` is ours.

Follows ``pkg/webhooks/admission/pods/validate/admit_pod.go`` (``validatePod``: the PodGroup a
pod names must exist and its queue be open; a queue named on the pod must be open; the job
disruption budget annotations ``validateAnnotation`` / ``validateIntPercentageStr``) and
``pods/mutate/mutate_pod.go`` (``patchSchedulingGates``: the queue-allocation gate for a pod that
asks for it). A pod of another scheduler is let through untouched, by both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from caldera.admission.podgroups import queue_state_problem
from caldera.admission.review import Denied, Missing, Patch, Review, object_name
from caldera.models.names import parse_int64
from caldera.models.volcano import (
    GROUP_NAME_ANNOTATION,
    JDB_MAX_UNAVAILABLE,
    JDB_MIN_AVAILABLE,
    QUEUE_ALLOCATION_GATE,
    QUEUE_NAME_ANNOTATION,
)

__all__ = ["ADMIT_REASON", "mutate_pod", "ours", "validate_pod"]

ADMIT_REASON = "Admit"
"""The reason of the Warning event a refused budget annotation records, as Volcano's."""
_JDB_KEYS = (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE)


class BudgetDenied(Denied):
    """A budget value ``validateIntPercentageStr`` refuses: also recorded as a Warning ``Admit``
    event, as Volcano's ``recordEvent`` does (two budgets at once are refused without one)."""


def ours(review: Review) -> bool:
    scheduler = review.spec.get("schedulerName") or "default-scheduler"
    return scheduler in review.options.scheduler_names


def _pod_name(review: Review) -> str:
    return object_name(review.obj.get("metadata") or {}) or review.name


def validate_pod(review: Review) -> None:
    if review.operation != "CREATE":
        raise Denied("expect operation to be 'CREATE'")
    if not ours(review):
        return
    notes = review.annotations
    group = str(notes.get(GROUP_NAME_ANNOTATION) or "")
    if group:
        podgroup = review.state.podgroups.get(f"{review.namespace}/{group}")
        if podgroup is None:
            raise Missing(
                f"failed to get PodGroup for pod <{review.namespace}/{_pod_name(review)}>: "
                f'podgroups.scheduling.volcano.sh "{group}" not found'
            )
        queue = podgroup.spec.queue or review.options.default_queue
        problem = _job_queue_problem(review, queue)
        if problem is not None:
            kind, text = problem
            raise kind(f"failed : {text};")
        return
    queue = str(notes.get(QUEUE_NAME_ANNOTATION) or "")
    problem = _job_queue_problem(review, queue) if queue else None
    bad_value, both = _budget_problem(notes)
    if bad_value:
        raise BudgetDenied(bad_value)
    if both:
        raise Denied(both)
    if problem is not None:
        kind, text = problem
        raise kind(text.strip())


def _job_queue_problem(review: Review, queue: str) -> tuple[type[Denied], str] | None:
    """``checkQueueState``: how to refuse (:class:`Missing` while the queue is not there, which
    a lagging cache may cure) and Volcano's text (its leading space and trailing ``;``)."""
    problem = queue_state_problem(review, queue)
    if problem is None:
        return None
    if problem[0] == "missing":
        return Missing, f" unable to find job queue: {problem[1]};"
    return Denied, (
        " can only submit job to queue with state `Open`, "
        f"queue `{queue}` status is `{problem[1]}`;"
    )


def _budget_problem(notes: Mapping[str, Any]) -> tuple[str, str]:
    """``validateAnnotation``: each budget a count > 0 or a percentage in 1%–99%, not both.
    (a bad value's text, or "";  the two-budgets text, or "")."""
    present = [key for key in _JDB_KEYS if key in notes]
    for key in present:
        problem = _int_or_percent_problem(key, str(notes[key]))
        if problem:
            return problem, ""
    if len(present) > 1:
        keys = " ".join(_JDB_KEYS)
        return "", f"not allow configure multiple annotations <[{keys}]> at same time"
    return "", ""


def _int_or_percent_problem(key: str, value: str) -> str:
    """``validateIntPercentageStr`` (``intstr.Parse``: an integer when ``strconv.Atoi`` reads
    it, else a string whose ``%`` signs are dropped before reading the number)."""
    number = parse_int64(value)
    if number is not None:
        if number <= 0:
            return f'invalid value <"{value}"> for {key}, it must be a positive integer'
        return ""
    digits = value.replace("%", "")
    percent = parse_int64(digits)
    if percent is None:
        return f'invalid value strconv.Atoi: parsing "{digits}": invalid syntax for {key}'
    if percent <= 0 or percent >= 100:
        return (
            f'invalid value <"{value}"> for {key}, it must be a valid percentage which between '
            "1% ~ 99%"
        )
    return ""


def mutate_pod(review: Review) -> Patch:
    """The queue-allocation gate, once, on a pod of ours that opts in with the annotation."""
    if review.operation != "CREATE" or not ours(review):
        return {}
    if str(review.annotations.get(QUEUE_ALLOCATION_GATE, "")).lower() != "true":
        return {}
    gates = list(review.spec.get("schedulingGates") or ())
    if any(isinstance(g, Mapping) and g.get("name") == QUEUE_ALLOCATION_GATE for g in gates):
        return {}
    return {"spec": {"schedulingGates": [*gates, {"name": QUEUE_ALLOCATION_GATE}]}}
