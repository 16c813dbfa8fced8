"""One scheduling cycle: open a session on a snapshot, run the actions, close it."""

from __future__ import annotations

from caldera.api.snapshot import Snapshot
from caldera.framework.close import close_session
from caldera.framework.intents import CycleResult
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.framework.session import Session

__all__ = ["run_cycle"]


def run_cycle(snapshot: Snapshot, policy: Policy, registry: Registry) -> CycleResult:
    """Schedule ``snapshot`` once under ``policy``; the snapshot is consumed."""
    ssn = Session(snapshot, policy, registry)
    ssn.open()
    ssn.run_actions()
    close_session(ssn)
    return ssn.result
