"""Every setting of ``caldera run``, with its default and what it does, in one place.

The command line (:mod:`caldera.cli`) builds its flags from these fields: the flag is the field
name with dashes (``schedule_period`` → ``--schedule-period``) unless :data:`FLAG_NAMES` says
otherwise (Volcano's names), the default is the field's, and the help is the field's docstring.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache

from caldera.model import FULL_REBUILD_EVERY
from caldera.sharding.ring import statefulset_members
from caldera.sharding.scope import Scope, parse_node_selector

__all__ = ["FLAG_NAMES", "Settings", "help_of"]


@dataclass(slots=True)
class Settings:
    scheduler_names: list[str] = field(default_factory=lambda: ["volcano"])
    """Handle pods with this schedulerName (repeatable)."""
    scheduler_sharding_mode: str = "none"
    """none, hard (place pods only on the nodes of this scheduler's NodeShard) or soft (its
    nodes first, the others when none of them fits), as Volcano's --scheduler-sharding-mode."""
    scheduler_sharding_name: str = "volcano"
    """The NodeShard this scheduler follows (Volcano's --scheduler-sharding-name)."""
    node_selector: list[str] = field(default_factory=list)
    """Place pods only on nodes carrying one of these labels, key:value (repeatable, or
    comma-separated), as Volcano's --node-selector: several schedulers each own a set of nodes.
    The other nodes' pods still count for their queues."""
    peer_scheduler_names: list[str] = field(default_factory=list)
    """The schedulerName of each other instance that shares this cluster's queues, when they
    each have their own (--node-selector or NodeShards; repeatable, or comma-separated): their
    running jobs count for the queues here, and so do the nodes outside --node-selector, so a
    queue's capability and deserved hold for the whole cluster; of the instances, the one whose
    name sorts first writes the queues' status. Without it each instance counts only its own
    pods and none writes the queues' status."""
    scheduler_conf: str | None = None
    """Policy file in volcano-scheduler.conf format, reloaded when it changes (default: Volcano's
    built-in policy)."""
    strict_policy: bool = False
    """Refuse a policy that has keys nothing reads or plugins Caldera does not have (default:
    log each one and schedule with the rest, as Volcano does)."""
    schedule_period: float = 1.0
    """The longest time between two sessions, a Go duration; news (a new pending pod, freed
    capacity) starts one sooner."""
    session_debounce: float = 0.02
    """How long a session waits after the first news for more to arrive, a Go duration."""
    default_queue: str = "default"
    """Queue for PodGroups and bare pods that name none."""
    listen_address: str = ":8080"
    """Metrics address (/metrics); empty to serve none."""
    healthz_address: str = ":11251"
    """/healthz and /readyz address; empty to serve none."""
    kubeconfig: str | None = None
    """Kubeconfig file (default: in-cluster credentials, else KUBECONFIG or ~/.kube/config)."""
    api_wait: float = 10.0
    """How long to wait for the API server at start before exiting with code 2."""
    leader_elect: bool = True
    """Elect a leader through a Lease; only the leader schedules."""
    lease_duration: float = 15.0
    """How long a Lease holds without renewal."""
    renew_deadline: float = 10.0
    """How long the leader keeps trying to renew before it gives up leading."""
    retry_period: float = 2.0
    """How often candidates try to take or renew the Lease."""
    lock_namespace: str = "volcano-system"
    """Namespace of the Lease."""
    lock_name: str = ""
    """Name of the Lease (default: the first scheduler name)."""
    bind_workers: int = 32
    """Most binds in flight at once; fewer while the API server is slow to answer."""
    bind_timeout: float = 10.0
    """How long one bind request may take, a Go duration."""
    create_podgroups: bool = False
    """Create a PodGroup object for each bare pod and annotate the pod with it, as Volcano's
    pg-controller does (two more writes per pod). Off: bare pods are grouped in memory alike."""
    post_events: bool = True
    """Post Kubernetes Events (Scheduled, FailedScheduling, Unschedulable, Evict)."""
    policy_check_interval: float = 2.0
    """How often the policy file is checked for changes."""
    log_format: str = "full"
    """plain, full, or json (one object per line, with an object reference)."""
    verbose: bool = False
    """Debug logging."""
    full_rebuild_every: int = FULL_REBUILD_EVERY
    """Build the scheduler's model of the cluster from nothing every Nth session, a check on the
    model kept between sessions, which otherwise applies only what changed (1: every session;
    0, the default: only when a node is added, gone or not Ready, or queue names, priority
    classes or resource names change). A build
    from nothing takes seconds on a cluster of 50,000 pods, and no pod is placed meanwhile."""
    session_process: bool = False
    """Run sessions in a process of their own, forked from the operator, rather than in a thread
    of it: a burst drains about a fifth faster (the session has a core of its own), while the
    process holds a second copy of the objects it reads (at 50,000 pods, about 140 MiB more)."""

    enabled_admission: str = ""
    """Admission webhooks to serve, comma-separated paths as Volcano's webhook manager names them
    (/queues/mutate, /queues/validate, /podgroups/mutate, /podgroups/validate, /pods/mutate,
    /pods/validate, /hypernodes/validate; "all" for every one). Every replica serves them;
    empty serves none."""
    webhook_port: int = 8443
    """Port of the admission webhook server (HTTPS)."""
    webhook_service_name: str = "caldera-webhook"
    """Service in front of the webhook server, named in the webhook configurations."""
    webhook_namespace: str = "volcano-system"
    """Namespace of that Service and of the Secret holding the self-signed certificate."""
    webhook_url: str = ""
    """Reach the webhooks at this URL instead of through the Service (a scheduler run outside
    the cluster)."""
    tls_cert_file: str = ""
    """The webhook server's certificate (PEM); empty: a self-signed one kept in the Secret
    <webhook-service-name>-tls and shared by every replica."""
    tls_private_key_file: str = ""
    """Private key of --tls-cert-file."""
    ca_cert_file: str = ""
    """CA bundle the API server checks --tls-cert-file against (default: the certificate)."""
    max_queue_depth: int = 5
    """Deepest queue hierarchy the queue webhook admits (root is depth 1)."""
    enable_root_queue_protection: bool = True
    """Refuse changes to the root queue's capability, deserved and guarantee."""
    enable_queue_allocated_pods_check: bool = False
    """Refuse deleting a queue that still has pods placed."""

    def lock(self, scope: Scope) -> str:
        """The Lease's name; in a hash split each instance has its own (it shares its work with
        the others, not its slot)."""
        name = self.lock_name or self.scheduler_names[0]
        return f"{name}-{scope.me}" if scope.members else name

    def scope(self, environ: Mapping[str, str] | None = None) -> Scope:
        """This instance's share of the cluster: ``--node-selector``, and Volcano's hash split
        from the environment (``getMultiSchedulerInfo``: ``MULTI_SCHEDULER_ENABLE=true``,
        ``SCHEDULER_NUM``, ``SCHEDULER_POD_NAME``; a number that does not parse is 1). Raises
        ValueError for a pod name without the StatefulSet's ``-<ordinal>``, or for a peer
        scheduler name that is also this instance's."""
        env = os.environ if environ is None else environ
        selector = parse_node_selector(
            part for entry in self.node_selector for part in entry.split(",")
        )
        peers = frozenset(
            name.strip()
            for entry in self.peer_scheduler_names
            for name in entry.split(",")
            if name.strip()
        )
        if mine := sorted(peers & set(self.scheduler_names)):
            raise ValueError(
                f"--peer-scheduler-name {mine[0]}: this instance's own --scheduler-name; name "
                "only the other instances' schedulers"
            )
        scope = Scope(
            node_selector=selector,
            shard_mode=self.scheduler_sharding_mode,
            shard_name=self.scheduler_sharding_name,
            name=self.scheduler_names[0],
            peers=peers,
        )
        if env.get("MULTI_SCHEDULER_ENABLE") != "true":
            return scope
        me = env.get("SCHEDULER_POD_NAME", "")
        if "-" not in me:
            raise ValueError(
                f"SCHEDULER_POD_NAME {me!r}: a StatefulSet pod's name (<name>-<ordinal>) is "
                "needed with MULTI_SCHEDULER_ENABLE=true"
            )
        try:
            count = int(env.get("SCHEDULER_NUM", ""))
        except ValueError:
            count = 1
        return replace(scope, me=me, members=tuple(statefulset_members(me, count)))


FLAG_NAMES = {
    "scheduler_names": "--scheduler-name",
    "peer_scheduler_names": "--peer-scheduler-name",
    "lease_duration": "--leader-elect-lease-duration",
    "renew_deadline": "--leader-elect-renew-deadline",
    "retry_period": "--leader-elect-retry-period",
    "lock_namespace": "--leader-elect-resource-namespace",
    "lock_name": "--leader-elect-resource-name",
}
"""Flags whose names are Volcano's rather than the field's."""


@cache
def _docstrings() -> dict[str, str]:
    """Each field's docstring (the string literal after it in the class body)."""
    tree = ast.parse(inspect.getsource(Settings))
    body = tree.body[0].body  # type: ignore[attr-defined]
    out: dict[str, str] = {}
    for stmt, after in itertools.pairwise(body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            out[stmt.target.id] = " ".join(after.value.value.split())
    return out


def help_of(name: str) -> str:
    return _docstrings()[name]
