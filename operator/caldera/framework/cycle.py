"""One scheduling cycle: open a session on a snapshot, run the actions, close it."""

from __future__ import annotations

from collections.abc import Callable

from caldera.api.snapshot import Snapshot
from caldera.framework.close import close_session
from caldera.framework.intents import Bind, CycleResult
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.framework.session import Session

__all__ = ["run_cycle"]


def run_cycle(
    snapshot: Snapshot,
    policy: Policy,
    registry: Registry,
    on_bind: Callable[[Bind], None] | None = None,
    *,
    detail: bool = True,
    trace: str = "",
) -> CycleResult:
    """Schedule ``snapshot`` once under ``policy``; the snapshot is consumed. ``on_bind`` is told
    of each bind as soon as it is decided (all of them are in the result as well). Without
    ``detail`` (the operator) the per-node reasons only ``caldera explain`` shows are not kept;
    with ``trace`` (a pod's ``namespace/name``) every node's reasons for that pod are."""
    ssn = Session(snapshot, policy, registry)
    ssn.on_bind = on_bind
    ssn.detail = detail
    ssn.traced = trace
    ssn.open()
    ssn.run_actions()
    close_session(ssn)
    return ssn.result
