"""DynamicResources: the pod's ResourceClaims must be allocated, or allocatable, on the node.

kube-scheduler's plugin for structured parameters (``resource.k8s.io/v1``), as Volcano's
predicates plugin runs it behind ``predicate.DynamicResourceAllocationEnable`` (PreFilter, Filter,
Reserve and Unreserve on the allocate and deallocate events, PreBind in the binder):

- **PreFilter.** A pod without ``resourceClaims`` skips the plugin (one call). A claim from a
  template is the one ``status.resourceClaimStatuses`` names (not there yet: ``pod "ns/name":
  ResourceClaim not created yet``; named as none: no claim needed) and must be controlled by the
  pod; a claim must exist (``could not find ResourceClaim "ns/name"``) and not be deleting. An
  allocated claim already reserved for 256 other consumers is ``resourceclaim in use``; a claim
  another pod of this session is allocating is ``resource claim ns/name is in the process of
  being allocated``; an unallocated claim's requests must name DeviceClasses that exist
  (``request r: device class c does not exist``).
- **Filter.** An allocated claim fits only the nodes its ``status.allocation.nodeSelector``
  matches (``resourceclaim not available on the node``). The unallocated claims must all be
  allocatable from the devices available to the node (:mod:`dra_devices`) that no claim holds and
  no pod of this session reserved, with the class's and the request's CEL selectors
  (:mod:`dra_cel`); otherwise ``cannot allocate all claims``. A node where the search errors out
  (a selector failing on a device, an ``All`` request over an incomplete pool, the
  ``dynamicresources.filterTimeoutSeconds`` budget spent: ``timed out trying to allocate
  devices``) is rejected with that error's text.
- **Reserve/Unreserve.** Placing a task allocates its unallocated claims on its node (the first
  solution of the same search): the devices are taken for the rest of the session and the claims
  are in flight; deallocating gives them back.
- **PreBind.** Each bound task's claims travel with its Bind intent
  (:class:`~caldera.framework.intents.ClaimReservation`): the binder writes the new allocation
  and adds the pod to ``status.reservedFor`` before binding it.

Vectorised: class and request selectors are evaluated once per (expression, device) per session;
per request, the count of matching free devices per node is one numpy pass, and nodes without
enough of them (or without any slice) are rejected without a search. When that count decides
alone (no constraints, ``All`` or ``firstAvailable`` requests, selector errors, and requests whose
devices do not overlap), no per-node search runs at all; otherwise the search runs in Python for
the nodes the counts leave.

Complexity per task: O(1) for a pod without claims; else O(R·(D + S·N)) numpy work for R
requests, D devices, S shared slices and N nodes, plus one search per remaining node in the
general case.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from caldera.api.task import Task, TaskStatus
from caldera.framework.intents import Bind
from caldera.framework.interfaces import EventHandler, Rejection, SessionView
from caldera.models.dra import (
    RESERVED_FOR_MAX_SIZE,
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    DeviceSelector,
    DraObjects,
    ExactDeviceRequest,
    ResourceClaim,
)
from caldera.plugins.predicates.base import SKIP, NodeFilter, PreFilterResult
from caldera.plugins.predicates.dra_cel import SelectorEngine
from caldera.plugins.predicates.dra_devices import (
    AllocationError,
    Alternative,
    ClaimPlan,
    Inventory,
    Pick,
    RequestPlan,
    Search,
)
from caldera.plugins.predicates.dra_prebind import Decision, with_claim_writes

__all__ = ["CANNOT_ALLOCATE", "IN_USE", "NOT_AVAILABLE", "DynamicResources"]

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
IN_USE = "resourceclaim in use"

BoolArray = npt.NDArray[np.bool_]


class DynamicResources:
    """The plugin for one session: its node filter, Reserve/Unreserve handler, preemption check
    and the PreBind writes for the binder."""

    def __init__(self, ssn: SessionView, filter_timeout_seconds: int = 10) -> None:
        self.objects: DraObjects = ssn.snapshot.dra
        self.nodes = ssn.nodes
        self.n = len(ssn.nodes)
        self.timeout = filter_timeout_seconds
        self.inv = Inventory(ssn.nodes, list(self.objects.slices.values()))
        self._engine: SelectorEngine | None = None
        self.claim_devices: dict[str, list[int]] = {}
        """Devices of claims allocated in the API."""
        self.consumers: dict[str, list[str]] = {}
        """Pod uid → keys of the allocated claims reserved for it."""
        for key, claim in self.objects.claims.items():
            allocation = claim.status.allocation
            if allocation is None:
                continue
            devices = [
                d
                for r in allocation.devices.results
                for d in self.inv.lookup(r.driver, r.pool, r.device)
            ]
            self.inv.taken[devices] = True
            self.claim_devices[key] = devices
            for ref in claim.status.reserved_for:
                self.consumers.setdefault(ref.uid, []).append(key)
        self._claims: dict[str, list[ResourceClaim] | str | None] = {}
        self._plans: dict[str, ClaimPlan | str] = {}
        self._available: dict[str, BoolArray] = {}
        self.pending: dict[str, str] = {}
        """Claim key → the task whose Reserve allocated it this session (in flight)."""
        self.decisions: dict[str, Decision] = {}
        self.node_filter = NodeFilter(
            "DynamicResources",
            self._reject,
            pre_filter=self._pre_filter,
            handler=EventHandler(allocate=self._reserve, deallocate=self._unreserve),
            simulate=self._simulate,
        )

    @property
    def engine(self) -> SelectorEngine:
        if self._engine is None:
            self._engine = SelectorEngine(self.inv.device_inputs())
        return self._engine

    # -- PreFilter ------------------------------------------------------------------------------

    def _resolve(self, task: Task) -> list[ResourceClaim] | str | None:
        """The pod's claims (None: nothing to do) or kube's message."""
        pod = f"{task.namespace}/{task.name}"
        statuses = self.objects.claim_statuses.get(pod, {})
        claims: list[ResourceClaim] = []
        for ref in task.spec.resource_claims:
            owned = False
            if ref.resource_claim_name is not None:
                name: str | None = ref.resource_claim_name
            elif ref.resource_claim_template_name is not None:
                if ref.name not in statuses:
                    return f'pod "{pod}": ResourceClaim not created yet'
                name, owned = statuses[ref.name], True
            else:
                return (
                    f'pod "{pod}", spec.resourceClaim "{ref.name}": '
                    "none of the supported fields are set"
                )
            if name is None:
                continue
            claim = self.objects.claims.get(f"{task.namespace}/{name}")
            if claim is None:
                return f'could not find ResourceClaim "{task.namespace}/{name}"'
            meta = claim.metadata
            if meta.deletion_timestamp is not None:
                return f'resourceclaim "{name}" is being deleted'
            controlled = any(r.controller and r.uid == task.uid for r in meta.owner_references)
            if owned and (meta.namespace != task.namespace or not controlled):
                return (
                    f"ResourceClaim {meta.namespace}/{meta.name} was not created for pod "
                    f"{pod} (pod is not owner)"
                )
            claims.append(claim)
        return claims or None

    def _claims_of(self, task: Task) -> list[ResourceClaim] | str | None:
        if task.uid not in self._claims:
            self._claims[task.uid] = self._resolve(task) if task.spec.resource_claims else None
        return self._claims[task.uid]

    def _blocked(self, task: Task, claims: Sequence[ResourceClaim]) -> str | None:
        """PreFilter's checks that depend on the session's state."""
        for claim in claims:
            allocated = claim.status.allocation is not None
            reserved = any(r.uid == task.uid for r in claim.status.reserved_for)
            if (
                allocated
                and len(claim.status.reserved_for) >= RESERVED_FOR_MAX_SIZE
                and not (reserved)
            ):
                return IN_USE
            if allocated:
                continue
            holder = self.pending.get(claim.key)
            if holder is not None and holder != task.uid:
                return f"resource claim {claim.key} is in the process of being allocated"
            for request in claim.spec.devices.requests:
                if request.exactly is not None or not request.first_available:
                    message = self._class_problem(request.exactly, request.name)
                    if message:
                        return message
                for sub in request.first_available:
                    message = self._class_problem(sub, f"{request.name}/{sub.name}")
                    if message:
                        return message
        return None

    def _class_problem(self, request: ExactDeviceRequest | None, name: str) -> str | None:
        class_name = request.device_class_name if request is not None else ""
        if not class_name:
            return f"request {name}: unsupported request type"
        if class_name not in self.objects.classes:
            return f"request {name}: device class {class_name} does not exist"
        return None

    def _pre_filter(self, task: Task) -> PreFilterResult:
        if not task.spec.resource_claims:
            return SKIP
        claims = self._claims_of(task)
        if claims is None:
            return SKIP
        if isinstance(claims, str):
            return claims
        return self._blocked(task, claims)

    # -- selectors and plans ----------------------------------------------------------------------

    def _selectable(
        self, class_name: str, selectors: Sequence[DeviceSelector], claim: str, request: str
    ) -> tuple[BoolArray, dict[int, str]] | str:
        """Devices the class's and then the request's selectors accept, and the errors kube's
        isSelectable would raise on the others."""
        device_class = self.objects.classes[class_name]
        undecided = np.ones(len(self.inv.devices), dtype=bool)
        errors: dict[int, str] = {}
        owners = (
            (f"class {class_name}", device_class.spec.selectors),
            (f"claim {claim}", selectors),
        )
        for owner, group in owners:
            for i, selector in enumerate(group):
                if selector.cel is None:
                    return (
                        f"claim {claim}, request {request}, selector #{i}: CEL expression "
                        "empty (unsupported selector type?)"
                    )
                found = self.engine.evaluate(selector.cel.expression)
                if found.compile_error is not None:
                    for bad in np.flatnonzero(undecided):
                        errors[int(bad)] = (
                            f"{owner}: selector #{i}: CEL compile error: {found.compile_error}"
                        )
                    undecided[:] = False
                    break
                for d, message in found.errors.items():
                    if undecided[d]:
                        errors[d] = (
                            f"{owner}: selector #{i} on device {self.inv.ids[d]}: "
                            f"CEL runtime error: {message}"
                        )
                        undecided[d] = False
                undecided &= found.matches
        return undecided, errors

    def _alternative(
        self, claim: ResourceClaim, spec: ExactDeviceRequest, name: str
    ) -> Alternative | str:
        found = self._selectable(spec.device_class_name, spec.selectors, claim.key, name)
        if isinstance(found, str):
            return found
        matches, errors = found
        return Alternative(name, spec.allocation_mode == "All", spec.count, matches, errors)

    def _plan(self, claim: ResourceClaim) -> ClaimPlan | str:
        hit = self._plans.get(claim.key)
        if hit is not None:
            return hit
        requests: list[RequestPlan] = []
        plan: ClaimPlan | str | None = None
        for request in claim.spec.devices.requests:
            alternatives: list[Alternative] = []
            specs: list[tuple[ExactDeviceRequest, str]]
            if request.first_available:
                specs = [(s, f"{request.name}/{s.name}") for s in request.first_available]
            else:
                specs = [(request.exactly or ExactDeviceRequest(), request.name)]
            for spec, name in specs:
                alt = self._alternative(claim, spec, name)
                if isinstance(alt, str):
                    plan = alt
                    break
                alternatives.append(alt)
            if plan is not None:
                break
            prioritized = bool(request.first_available)
            requests.append(RequestPlan(request.name, tuple(alternatives), prioritized))
        if plan is None:
            constraints = tuple(
                (frozenset(c.requests), c.match_attribute)
                for c in claim.spec.devices.constraints
                if c.match_attribute
            )
            plan = ClaimPlan(claim.key, tuple(requests), constraints)
        self._plans[claim.key] = plan
        return plan

    # -- Filter ---------------------------------------------------------------------------------

    def _possible(self, plans: Sequence[ClaimPlan], taken: BoolArray) -> BoolArray:
        """Nodes with enough candidate devices for every request taken alone (a necessary
        condition; errors count as candidates so that the search reports them)."""
        fits = self.inv.has_any.copy()
        bad = np.zeros(self.n, dtype=bool)
        for row in self.inv.bad:
            bad[row] = True
        for _problem, here in self.inv.bad_shared:
            bad |= here
        for plan in plans:
            for request in plan.requests:
                any_alt = np.zeros(self.n, dtype=bool)
                for alt in request.alternatives:
                    maybe = alt.matches.copy()
                    maybe[list(alt.errors)] = True
                    if alt.all_devices:
                        any_alt |= (self.inv.count_per_node(maybe) >= 1) | bad
                    else:
                        any_alt |= self.inv.count_per_node(maybe & ~taken) >= alt.count
                fits &= any_alt
        return fits

    @staticmethod
    def _counts_decide(plans: Sequence[ClaimPlan]) -> bool:
        """True when :meth:`_possible` is exact: plain counted requests over disjoint devices."""
        alts: list[Alternative] = []
        for plan in plans:
            if plan.constraints:
                return False
            for request in plan.requests:
                if request.prioritized:
                    return False
                alts.extend(request.alternatives)
        if any(alt.all_devices or alt.errors for alt in alts):
            return False
        if len(alts) < 2:
            return True
        overlap = np.sum([alt.matches for alt in alts], axis=0)
        return bool(overlap.max(initial=0) <= 1)

    def _deadline(self) -> float | None:
        return time.monotonic() + self.timeout if self.timeout > 0 else None

    def _allocate(
        self, row: int, plans: Sequence[ClaimPlan], taken: BoolArray
    ) -> list[Pick] | str | None:
        try:
            return Search(self.inv, row, plans, taken, self._deadline()).run()
        except AllocationError as exc:
            return str(exc)

    def _available_on(self, claim: ResourceClaim) -> BoolArray | None:
        """Nodes an allocated claim's node selector matches (None: every node)."""
        allocation = claim.status.allocation
        if allocation is None or allocation.node_selector is None:
            return None
        mask = self._available.get(claim.key)
        if mask is None:
            mask = self._available[claim.key] = self.inv.selector_mask(allocation.node_selector)
        return mask

    def _split(self, task: Task) -> tuple[list[ResourceClaim], list[ClaimPlan]] | str | None:
        """(allocated claims, plans of the claims to allocate), kube's message, or None."""
        claims = self._claims_of(task)
        if claims is None or isinstance(claims, str):
            return claims
        blocked = self._blocked(task, claims)
        if blocked is not None:
            return blocked
        allocated = [c for c in claims if c.status.allocation is not None]
        plans: list[ClaimPlan] = []
        for claim in claims:
            if claim.status.allocation is None:
                plan = self._plan(claim)
                if isinstance(plan, str):
                    return plan
                plans.append(plan)
        return allocated, plans

    def _reject(self, task: Task) -> list[Rejection]:
        split = self._split(task)
        if split is None:
            return []
        if isinstance(split, str):
            return [(split, np.ones(self.n, dtype=bool))]
        allocated, plans = split
        failed = np.zeros(self.n, dtype=bool)
        errors: dict[str, BoolArray] = {}
        if plans:
            possible = self._possible(plans, self.inv.taken)
            failed = ~possible
            if not self._counts_decide(plans):
                for row in np.flatnonzero(possible):
                    found = self._allocate(int(row), plans, self.inv.taken)
                    if isinstance(found, str):
                        errors.setdefault(found, np.zeros(self.n, dtype=bool))[row] = True
                    elif found is None:
                        failed[row] = True
        unavailable = np.zeros(self.n, dtype=bool)
        for claim in allocated:
            mask = self._available_on(claim)
            if mask is not None:
                unavailable |= ~mask
        for mask in errors.values():
            unavailable &= ~mask
        unavailable &= ~failed
        out = [(CANNOT_ALLOCATE, failed), *errors.items(), (NOT_AVAILABLE, unavailable)]
        return [(reason, mask) for reason, mask in out if mask.any()]

    # -- Reserve / Unreserve --------------------------------------------------------------------

    def _reserve(self, task: Task) -> None:
        row = task.node
        if row < 0 or task.status not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            return
        split = self._split(task)
        claims = self._claims_of(task)
        if split is None or isinstance(split, str) or not isinstance(claims, list):
            return
        _allocated, plans = split
        allocations: dict[str, AllocationResult] = {}
        picks: list[Pick] = []
        if plans:
            found = self._allocate(row, plans, self.inv.taken)
            if not isinstance(found, list):
                return
            picks = found
            for ci, plan in enumerate(plans):
                mine = [p for p in picks if p.claim == ci]
                results = tuple(self._result(p) for p in mine)
                allocations[plan.key] = AllocationResult(
                    devices=DeviceAllocationResult(results=results),
                    node_selector=self.inv.node_selector([p.device for p in mine]),
                )
                self.pending[plan.key] = task.uid
        devices = tuple(p.device for p in picks)
        self.inv.taken[list(devices)] = True
        self.decisions[task.uid] = Decision(tuple(claims), allocations, devices)

    def _result(self, pick: Pick) -> DeviceRequestAllocationResult:
        spec = self.inv.slices[self.inv.device_slice[pick.device]].spec
        return DeviceRequestAllocationResult(
            request=pick.request,
            driver=spec.driver,
            pool=spec.pool.name,
            device=self.inv.devices[pick.device].name,
        )

    def _unreserve(self, task: Task) -> None:
        decision = self.decisions.pop(task.uid, None)
        if decision is None:
            return
        self.inv.taken[list(decision.devices)] = False
        for key in decision.allocations:
            if self.pending.get(key) == task.uid:
                del self.pending[key]

    # -- preemption -------------------------------------------------------------------------------

    def _simulate(
        self, task: Task, row: int, removed: Sequence[Task], added: Sequence[Task]
    ) -> list[str]:
        split = self._split(task)
        if split is None:
            return []
        if isinstance(split, str):
            return [split]
        allocated, plans = split
        taken = self.inv.taken.copy()
        gone = {t.uid for t in removed}
        for t in removed:
            decision = self.decisions.get(t.uid)
            if decision is not None:
                taken[list(decision.devices)] = False
            for key in self.consumers.get(t.uid, ()):
                users = {r.uid for r in self.objects.claims[key].status.reserved_for}
                if users <= gone:
                    taken[self.claim_devices[key]] = False
        for t in added:
            decision = self.decisions.get(t.uid)
            if decision is not None:
                taken[list(decision.devices)] = True
        if plans:
            found = self._allocate(row, plans, taken)
            if isinstance(found, str):
                return [found]
            if found is None:
                return [CANNOT_ALLOCATE]
        for claim in allocated:
            mask = self._available_on(claim)
            if mask is not None and not mask[row]:
                return [NOT_AVAILABLE]
        return []

    def pre_bind(self, bind: Bind) -> Bind:
        """PreBind: the bind of a task with claims gets its claim status writes."""
        decision = self.decisions.get(bind.uid)
        return bind if decision is None else with_claim_writes(decision, bind)
