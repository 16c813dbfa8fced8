"""The last look before binding onto a node another scheduler may also be filling.

In soft sharding a scheduler places on other shards' nodes when its own are full, and those nodes'
own scheduler places there too: each decides on its informers' view, which may be a moment
behind. Before such a binding the binder asks the API server which pods the node holds now
(``fieldSelector=spec.nodeName=<node>``, one list) and refuses the binding when the pod no longer
fits beside them, in any resource it requests. The refused pod's assumption is forgotten and the
next session places it again (:class:`~caldera.operator.writers.binder.Binder`). A node of the
scheduler's own shard is not re-checked: no other scheduler places there.
"""

from __future__ import annotations

from collections.abc import Callable

from caldera.cache.state import ClusterState
from caldera.framework.intents import Bind
from caldera.k8s.errors import API_ERRORS, describe
from caldera.k8s.listing import list_objects
from caldera.k8s.resources import PODS
from caldera.k8s.rest import Rest
from caldera.models.core import FINISHED_PHASES, Pod, effective_requests
from caldera.models.kinds import FIELD
from caldera.models.parse import parse_object

__all__ = ["NodeRecheck", "overfilled"]


def overfilled(
    allocatable: dict[str, float], others: list[Pod], asked: dict[str, float]
) -> str | None:
    """Why ``asked`` no longer fits beside ``others`` on a node of ``allocatable`` (None: it
    does); only the resources ``asked`` names count."""
    used: dict[str, float] = {}
    for pod in others:
        for name, value in effective_requests(pod.spec).items():
            used[name] = used.get(name, 0.0) + value
    short = [
        f"{name} {_amount(name, used.get(name, 0.0) + value)} > "
        f"{_amount(name, allocatable.get(name, 0.0))}"
        for name, value in sorted(asked.items())
        if value > 0 and used.get(name, 0.0) + value > allocatable.get(name, 0.0)
    ]
    return ", ".join(short) or None


def _amount(name: str, value: float) -> str:
    """A quantity as the API writes it: cpu in millicores, the rest as they are."""
    return f"{value:g}m" if name == "cpu" else f"{value:g}"


class NodeRecheck:
    """The binder's check of a node shared with another scheduler (``Bind.recheck``)."""

    def __init__(self, rest: Rest, state: Callable[[], ClusterState]) -> None:
        self._rest = rest
        self._state = state

    async def __call__(self, bind: Bind) -> str | None:
        state = self._state()
        node = state.nodes.get(bind.node)
        pod = state.pods.get(f"{bind.namespace}/{bind.name}")
        if node is None or pod is None:
            return None  # the binding itself will say what is wrong
        try:
            listed, _ = await list_objects(
                self._rest,
                PODS,
                page=500,
                resource_version=None,
                selector=f"{FIELD}spec.nodeName={bind.node}",
            )
        except API_ERRORS as exc:  # unchecked is not bound: the next session tries again
            return f"could not list the pods of node {bind.node}: {describe(exc)}"
        others = []
        for raw in listed:
            parsed = parse_object("Pod", raw)
            if not isinstance(parsed, Pod) or parsed.metadata.uid == bind.uid:
                continue
            if parsed.status.phase not in FINISHED_PHASES:
                others.append(parsed)
        why = overfilled(node.allocatable, others, effective_requests(pod.spec))
        if why is None:
            return None
        return f"node {bind.node} was filled by another scheduler before the binding ({why})"
