"""The writes of ``caldera queue open`` and ``caldera queue close``: a Queue's ``status.state``
(a merge patch of the ``status`` subresource) and, for the queues closed or opened with their
parent, Volcano's ``volcano.sh/closed-by-parent`` annotation (a merge patch of the queue).

The command line makes them (:mod:`caldera.queues_cli` says why the state is written
directly), and so does the operator for the bus Commands ``vcctl`` creates; everything that fails
is a :class:`~caldera.k8s.live.LiveError` of one line.
"""

from __future__ import annotations

from collections.abc import Sequence

from caldera.k8s.errors import API_ERRORS, describe
from caldera.k8s.live import LiveError, connect
from caldera.k8s.resources import QUEUES
from caldera.k8s.rest import MERGE_PATCH, ApiError, Rest
from caldera.queue_operate import QueueWrite

__all__ = ["QueueWrite", "apply_queue_writes", "write_queue_states"]


async def write_queue_states(
    kubeconfig: str | None,
    context: str | None,
    writes: Sequence[QueueWrite],
    *,
    timeout: float = 30.0,
) -> None:
    """Make ``writes`` in order; :class:`LiveError` at the first that fails (the ones before it
    stay made: each leaves the queue in a state the controller and the scheduler understand)."""
    rest, server = await connect(kubeconfig, context, timeout)
    try:
        await apply_queue_writes(rest, writes, server)
    finally:
        await rest.close()


async def apply_queue_writes(rest: Rest, writes: Sequence[QueueWrite], server: str = "") -> None:
    """Make ``writes`` in order with ``rest``; :class:`LiveError` at the first that fails."""
    for write in writes:
        await _write(rest, write, server)


async def _write(rest: Rest, write: QueueWrite, server: str) -> None:
    try:
        if write.annotations:
            await rest.call(
                "patch",
                QUEUES,
                name=write.name,
                body={"metadata": {"annotations": dict(write.annotations)}},
                content_type=MERGE_PATCH,
            )
        await rest.call(
            "patch",
            QUEUES,
            name=write.name,
            subresource="status",
            body={"status": {"state": write.state}},
            content_type=MERGE_PATCH,
        )
    except ApiError as exc:
        if exc.status == 404:
            raise LiveError(f"queue {write.name} does not exist at {server}") from None
        if exc.status == 403:
            raise LiveError(
                f"not allowed to set queue {write.name}'s state at {server}: the credentials "
                'need verb "patch" on resources "queues" and "queues/status" in API group '
                f'"{QUEUES.group}" (the server said: {exc.message})'
            ) from None
        raise LiveError(f"cannot set queue {write.name}'s state at {server}: {exc}") from None
    except API_ERRORS as exc:
        raise LiveError(
            f"cannot set queue {write.name}'s state at {server}: {describe(exc)}"
        ) from None
