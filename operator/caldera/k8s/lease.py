"""Lease-based leader election: only the leader schedules.

Uses kubernetes-asyncio's elector on a ``coordination.k8s.io/v1`` Lease named after the scheduler
(Volcano's defaults: 15 s lease, 10 s renew deadline, 2 s retry, namespace ``volcano-system``).
The holder identity is ``<hostname>_<uuid>``. A leader that cannot renew stops scheduling at once
and asks the process to exit, as Volcano does, so a restarted replica rejoins as a follower. A
leader that stops on purpose releases the Lease (clears its holder, as client-go's
``ReleaseOnCancel`` does), so a standby takes over at its next try instead of after the lease
duration.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from caldera.k8s.errors import API_ERRORS, describe
from caldera.k8s.resources import LEASES
from caldera.k8s.rest import Rest

__all__ = ["LeaderGate", "election_error"]

log = logging.getLogger(__name__)


def election_error(lease: float, renew: float, retry: float) -> str | None:
    """Why these periods cannot work (the elector's own rules), or None."""
    if min(lease, renew, retry) < 1:
        return "lease duration, renew deadline and retry period must each be at least 1s"
    if lease <= renew:
        return "the lease duration must exceed the renew deadline"
    if renew <= 1.2 * retry:
        return "the renew deadline must exceed 1.2 x the retry period"
    return None


class LeaderGate:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        self._leading = asyncio.Event()
        if not enabled:
            self._leading.set()

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    async def release(self, rest: Rest, *, name: str, namespace: str) -> None:
        """Give the Lease up if this replica holds it (best effort: it expires anyway)."""
        if not self.enabled or not self.leading:
            return
        self._leading.clear()
        try:
            lease = await rest.call("get", LEASES, namespace=namespace, name=name, timeout=2.0)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.pop("holderIdentity", None)
            spec["leaseDurationSeconds"] = 1
            await rest.call(
                "update", LEASES, namespace=namespace, name=name, body=lease, timeout=2.0
            )
            log.info("released the lease %s/%s", namespace, name)
        except API_ERRORS as exc:
            log.info("could not release the lease %s/%s: %s", namespace, name, describe(exc))

    async def run(
        self,
        api: client.ApiClient,
        *,
        name: str,
        namespace: str,
        lease: float,
        renew: float,
        retry: float,
        on_lost: Callable[[], None],
    ) -> None:
        if not self.enabled:
            return
        gate = self._leading

        async def started() -> None:
            log.info("%s became the leader (lease %s/%s)", self.identity, namespace, name)
            gate.set()  # and return: nothing is left running when the elector is cancelled

        async def stopped() -> None:
            gate.clear()
            log.error("%s lost the lease %s/%s; stopping", self.identity, namespace, name)
            on_lost()

        error = election_error(lease, renew, retry)
        if error is not None:
            log.error("leader election cannot start: %s; stopping", error)
            on_lost()
            return
        config = electionconfig.Config(
            LeaseLock(name, namespace, self.identity, api),
            # the Lease stores whole seconds (leaseDurationSeconds)
            lease_duration=max(round(lease), 1),
            renew_deadline=renew,
            retry_period=retry,
            onstarted_leading=started,
            onstopped_leading=stopped,
        )
        try:
            await leaderelection.LeaderElection(config).run()
        except asyncio.CancelledError:
            raise
        except Exception:
            # Whatever broke the elector, this replica can no longer prove it leads.
            log.exception("leader election failed; stopping")
            gate.clear()
            on_lost()
