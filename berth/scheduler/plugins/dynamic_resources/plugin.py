"""DynamicResources: a pod fits a node only if every ResourceClaim it uses can be met there.

kube-scheduler's DynamicResources plugin (structured parameters), vectorised over the node
table and held in the session's transaction:

- **PreFilter** resolves each of the pod's claims (``spec.resourceClaims``: by name, or made
  from a template by the resourceclaim controller). The pod waits,
  ``UNSCHEDULABLE_AND_UNRESOLVABLE``: with a ``ResourceClaimPending`` while a claim from a
  template is not made yet, or made but not seen yet (kube-scheduler's PreEnqueue: nothing is
  written on the pod for it), and with a ``ResourceClaimProblem`` naming the claim and the
  field when a claim it names is missing, being deleted, not made for this pod,
  malformed, names a DeviceClass that does not exist or one whose selector does not compile,
  or is reserved by as many consumers as a claim may have. A claim allocated already (by
  kube-scheduler, another leader, or earlier in this session) is used as it is: never
  allocated again.
- **Filter**: on each node, allocated claims' node selectors must match, and the allocator
  (:mod:`.allocator`) must find devices for every unallocated claim at once. A selector that
  fails at run time, or ``All`` over a pool being updated, fails the pod everywhere with the
  reason. The reasons per node name the claim that cannot be met (too few free devices, no
  matching devices, a broken pool).
- **Reserve** allocates on the chosen node and holds the allocation in the session
  (:mod:`.ledger`): the next pods of the session see its devices taken, and a gang's members
  sharing the claim see it allocated. **Unreserve** gives it back. A gang's claims are thus
  allocated in one transaction or none: the statement's rollback undoes every Reserve.
- **PreBind** records, before the binding, a :class:`~berth.scheduler.framework.decisions.
  ReserveClaim` per claim the pod does not already hold: the allocation to write (from the
  pod whose Reserve made it) and the pod to add to ``status.reservedFor``.
- **PostFilter**: a pod that fits no node while one of its claims is allocated where it cannot
  go, and reserved by no other pod (left so by a scheduler that failed half way, or allocated
  for a pod that went), gets that claim deallocated — a :class:`~berth.scheduler.framework.
  decisions.DeallocateClaim` recorded at session close if the pod is still unplaced then — so
  that it can be allocated again where the pod fits, as kube-scheduler's PostFilter does; the
  pod's reason says so.

**Reservations** (Koordinator's reserved devices): a Reservation whose template names
``resourceClaims`` is placed as its reserve pod, whose claims are *held claims* that live in
Berth's cache only (:mod:`berth.scheduler.snapshot.reservations`): they are allocated here
like any pod's, in the same transaction as the rest of the session's statement, and PreBind
writes nothing for them; the Reservation plugin records the allocation on the Reservation
(``status.devices``, from the ``claim_allocations`` hook), and from then on every other pod
sees those devices taken. An owner pod that the Reservation plugin would place into the
reservation on a node (the ``reservation_rows`` hook) sees the devices held there as free,
and the allocator tries them first: its own claims are allocated on them, with the claims'
own specs, and are what the API server is given (the reservation, used once, lets go of the
rest).

As a session plugin it holds the ledger, frees for the session the devices of the claims of
pods it evicts, refuses to sign pods with claims (``unsignable``: their claims, not their
shape, decide where they go), and answers ``device_requests`` for queue accounting.

Not done (kube-scheduler does): devices with binding conditions are never chosen, DRA-backed
extended resources (``DeviceClass.spec.extendedResourceName``) and DeviceTaintRules are not
read, and the prioritized list does not score nodes by the alternative they would get.
"""

from __future__ import annotations

import collections.abc
import dataclasses

import numpy as np

from berth.api import dra
from berth.scheduler.framework import (
    cyclestate,
    decisions,
    filtering,
    handles,
    interfaces,
    jobs,
    reasons,
    registries,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.plugins.dynamic_resources import allocator, answers, inuse, ledger
from berth.scheduler.snapshot import (
    devices,
    nodetable,
    podconstraints,
    pods,
    reservations,
    resourceclaims,
    resourceslices,
    selectors,
)

__all__ = ["NAME", "DynamicResources", "new"]

NAME = names.DYNAMIC_RESOURCES
_STATE = cyclestate.StateKey(f"{NAME}/claims")
_FIELDS = frozenset({podconstraints.Field.RESOURCE_CLAIMS})


@dataclasses.dataclass(frozen=True)
class _Released:
    """What an owner pod sees on a node where a Reservation holds devices for it."""

    reservation: str  # the Reservation's key
    in_use: inuse.InUse  # the session's books with the held devices free
    held: frozenset[resourceslices.DeviceId]  # tried first


def _preferring(
    pools: tuple[devices.Pool, ...], held: frozenset[resourceslices.DeviceId]
) -> tuple[devices.Pool, ...]:
    """``pools`` with the devices in ``held`` first (the allocator's search is first-fit)."""
    first = [p for p in pools if any(d.id in held for d in p.devices)]
    rest = [p for p in pools if not any(d.id in held for d in p.devices)]
    return tuple(
        dataclasses.replace(
            pool,
            devices=tuple(sorted(pool.devices, key=lambda d: d.id not in held)),
        )
        for pool in first
    ) + tuple(rest)


@dataclasses.dataclass
class _PodClaims:
    """The pod's claims as PreFilter found them, and what Filter worked out per node."""

    allocated: tuple[tuple[str, resourceclaims.AllocationInfo], ...]  # used as they are
    reused: tuple[str, ...]  # claim keys allocated already (the pod only reserves them)
    to_allocate: tuple[resourceclaims.ResourceClaimInfo, ...]
    version: int  # the ledger's when PreFilter ran
    outcomes: dict[str, allocator.Outcome] = dataclasses.field(default_factory=dict)
    released: dict[str, _Released] | None = None  # node -> a reservation's devices, free

    @property
    def specs(self) -> tuple[resourceclaims.ClaimSpec, ...]:
        """What the claims to allocate ask for (what the allocator's answer depends on)."""
        return tuple(claim.spec for claim in self.to_allocate)

    def clone(self) -> _PodClaims:
        return self  # read-only once Filter ran; Reserve recomputes when the ledger moved


def _problem(
    text: str,
    *,
    claim: str,
    code: reasons.ReasonCode = reasons.ReasonCode.RESOURCE_CLAIM_PROBLEM,
) -> statuses.Status:
    return statuses.new(
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        text,
        reason_code=code,
        details={"claim": claim},
    )


def _describe(claim: resourceclaims.ResourceClaimInfo) -> str:
    """``resourceclaim ns/x (request gpu: 2 of deviceclass gpu.example.com)``."""
    parts = []
    for request in claim.spec.requests:
        alternatives = [
            f"{'all' if s.all else s.count} of deviceclass {s.class_name}"
            for s in request.alternatives
        ]
        parts.append(f"request {request.name}: {' or '.join(alternatives)}")
    name = f"resourceclaim {claim.key}"
    if claim.controller is not None and claim.controller[0] == reservations.HELD_CLAIM_KIND:
        # A Reservation's held claim: named as the user wrote it, by its template entry.
        name = f"spec.template.spec.resourceClaims entry {claim.key.rpartition(':')[2]}"
    return f"{name} ({'; '.join(parts)})" if parts else name


class DynamicResources(
    interfaces.PreFilterPlugin,
    interfaces.FilterPlugin,
    interfaces.ReservePlugin,
    interfaces.PreBindPlugin,
    interfaces.PostFilterPlugin,
    interfaces.SessionPlugin,
    interfaces.ConstraintPlugin,
):
    """PreFilter, Filter, Reserve, PreBind and the session's ledger; see the module docstring."""

    name = NAME

    def __init__(self, handle: handles.ExtendedHandle) -> None:
        self._handle = handle
        self._ledger: ledger.Ledger | None = None
        self._freeing: dict[str, tuple[str, str]] = {}  # pod key -> (claim key, claim uid)
        self._hooks: sessions.SessionHooks | None = None
        self._answers = answers.Answers()  # the allocator's, from cycle to cycle

    @property
    def understands(self) -> frozenset[podconstraints.Field]:
        """``spec.resourceClaims``, unless the session's snapshot knows no DRA object because
        its source does not feed them (then Berth's own pods with claims are refused, and
        admission mode leaves them to kube-scheduler)."""
        if self._handle.in_session and not self._handle.snapshot().devices.watched:
            return frozenset()
        return _FIELDS

    # Session ----------------------------------------------------------------------------------
    def on_session_open(self, session: sessions.Session) -> None:
        snapshot = session.snapshot
        books = self._ledger = ledger.Ledger(snapshot.devices, pods_by_key=snapshot.pods)
        self._freeing = {}
        hooks = session.hooks
        hooks.unsignable.add(lambda pod: bool(pod.resource_claims), plugin=NAME)
        hooks.device_requests.add(books.device_requests, plugin=NAME)
        hooks.claim_allocations.add(books.claim_allocations, plugin=NAME)
        self._hooks = hooks
        session.hooks.allocated.add(self._on_allocated, plugin=NAME)
        session.hooks.deallocated.add(self._on_deallocated, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        books, freeing = self._ledger, self._freeing
        self._ledger, self._freeing, self._hooks = None, {}, None
        freed: set[str] = set()
        for pod_key, (key, uid) in sorted(freeing.items()):
            pod = session.snapshot.pods.get(pod_key)
            if pod is None or pod_key in session.placed or key in freed:
                continue
            if books is not None and books.users.get(key):
                continue  # a pod of this session uses it now
            namespace, _, name = key.partition("/")
            session.recorder.record(
                decisions.DeallocateClaim(
                    namespace=namespace, name=name, uid=uid, pod=pod.name, pod_uid=pod.uid
                )
            )
            freed.add(key)

    def _books(self) -> ledger.Ledger:
        if self._ledger is None or self._ledger.devices is not self._handle.snapshot().devices:
            # Used without a session plugin's open (a test placing pods by hand): a fresh one.
            snapshot = self._handle.snapshot()
            self._ledger = ledger.Ledger(snapshot.devices, pods_by_key=snapshot.pods)
        return self._ledger

    def _active(self, pod: pods.PodInfo) -> bool:
        """Whether this plugin handles ``pod``: it has claims and DRA objects are watched (else
        Berth's own such pods are refused, and kube-scheduler handles admission mode's)."""
        return bool(pod.resource_claims) and self._handle.snapshot().devices.watched

    def _on_allocated(self, event: jobs.Event) -> None:
        if event.pod.node_name is not None and event.pod.resource_claims:
            self._books().restored(event.pod)  # an eviction undone

    def _on_deallocated(self, event: jobs.Event) -> None:
        if event.pod.node_name is not None and event.pod.resource_claims:
            self._books().evicted(event.pod)

    # PreFilter --------------------------------------------------------------------------------
    def _resolve(self, pod: pods.PodInfo) -> _PodClaims | statuses.Status:
        books = self._books()
        known = books.devices
        allocated: list[tuple[str, resourceclaims.AllocationInfo]] = []
        reused: list[str] = []
        to_allocate: list[resourceclaims.ResourceClaimInfo] = []
        seen: set[str] = set()
        for entry in pod.resource_claims:
            if entry.skipped:
                continue  # the controller made no claim on purpose: nothing to allocate
            key = entry.key(pod.namespace)
            if key is not None and key in seen:
                continue  # two entries naming one claim: it is allocated once
            if key is not None:
                seen.add(key)
            if key is None:
                template = f"{pod.namespace}/{entry.template}"
                if template not in known.templates:
                    return _problem(
                        f"resourceclaimtemplate {template} not found "
                        f"({entry.field}.resourceClaimTemplateName)",
                        claim=template,
                    )
                return _problem(
                    f"waiting for the resourceclaim controller to make the claim of "
                    f"{entry.field} from resourceclaimtemplate {template}",
                    claim=template,
                    code=reasons.ReasonCode.RESOURCE_CLAIM_PENDING,
                )
            claim = known.claims.get(key)
            # A reserve pod's claims are its Reservation's template entries: named by field.
            subject = (
                entry.field.replace("spec.", "spec.template.spec.", 1)
                if pod.reserve
                else f"resourceclaim {key}"
            )
            if claim is None:
                return _problem(
                    f"resourceclaim {key} not found ({entry.field})",
                    claim=key,
                    # Made from its template and named in the pod's status, not seen yet:
                    # the claim's watch is behind the pod's, a moment's wait like the above.
                    code=reasons.ReasonCode.RESOURCE_CLAIM_PENDING
                    if entry.from_template
                    else reasons.ReasonCode.RESOURCE_CLAIM_PROBLEM,
                )
            if claim.deleting:
                return _problem(f"resourceclaim {key} is being deleted", claim=key)
            if entry.from_template and (claim.controller is None or claim.controller[2] != pod.uid):
                return _problem(
                    f"resourceclaim {key} was not made for pod {pod.key} ({entry.field}: "
                    "the pod is not its owner)",
                    claim=key,
                )
            if claim.problem is not None:
                if pod.reserve:
                    return _problem(claim.problem, claim=key)  # it names the field
                return _problem(f"{subject}: {claim.problem}", claim=key)
            allocation = books.allocation_of(key)
            if allocation is not None:
                if not claim.reserved_for_pod(pod.uid):
                    if books.consumers(key) >= dra.RESERVED_FOR_MAX_SIZE:
                        return _problem(
                            f"resourceclaim {key} is in use by "
                            f"{dra.RESERVED_FOR_MAX_SIZE} consumers, the most a claim may have",
                            claim=key,
                        )
                    reused.append(key)
                allocated.append((key, allocation))
                continue
            for request in claim.spec.requests:
                for spec in request.alternatives:
                    cls = known.classes.get(spec.class_name)
                    if cls is None:
                        return _problem(
                            f"{subject}: request {spec.name}: deviceclass "
                            f"{spec.class_name} does not exist",
                            claim=key,
                        )
                    if cls.problem is not None:
                        return _problem(
                            f"deviceclass {cls.name} (used by {subject}): {cls.problem}",
                            claim=key,
                        )
            to_allocate.append(claim)
        return _PodClaims(
            allocated=tuple(allocated),
            reused=tuple(reused),
            to_allocate=tuple(to_allocate),
            version=books.version,
        )

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        if not self._active(pod):
            return statuses.SKIP
        found = self._resolve(pod)
        if isinstance(found, statuses.Status):
            return found
        if not found.allocated and not found.to_allocate:
            return statuses.SKIP  # every claim was skipped on purpose
        state.write(_STATE, found)
        return statuses.SUCCESS

    # Filter -----------------------------------------------------------------------------------
    def _outcome(
        self, found: _PodClaims, node: str, *, labels: collections.abc.Mapping[str, str]
    ) -> allocator.Outcome:
        """The allocation of the pod's claims on ``node`` (computed once per attempt)."""
        outcome = found.outcomes.get(node)
        if outcome is None:
            books = self._books()
            pools, in_use = self._view(found, node, labels=labels)
            outcome = allocator.allocate(
                found.to_allocate, node=node, pools=pools, catalog=books.catalog, in_use=in_use
            )
            found.outcomes[node] = outcome
        return outcome

    def _view(
        self, found: _PodClaims, node: str, *, labels: collections.abc.Mapping[str, str]
    ) -> tuple[tuple[devices.Pool, ...], inuse.InUse]:
        """The pools ``node`` reaches and the devices in use, as the pod sees them there: on a
        node where a Reservation holds devices for it, those are free and tried first."""
        books = self._books()
        pools = books.pools_for(node, labels=labels)
        released = (found.released or {}).get(node)
        if released is None:
            return pools, books.in_use
        return _preferring(pools, released.held), released.in_use

    def _release(self, found: _PodClaims, pod: pods.PodInfo) -> dict[str, _Released]:
        """Per node, the devices a Reservation holds there for ``pod`` (an owner the
        Reservation plugin would place into it there), worked out once per attempt."""
        if found.released is not None:
            return found.released
        found.released = {}
        rows = self._hooks.reservation_rows(pod) if self._hooks is not None else None
        if pod.reserve or not rows:
            return found.released
        books = self._books()
        snapshot = self._handle.snapshot()
        for node, key in sorted(rows.items()):
            reserve = snapshot.pods.get(reservations.reserve_pod_key(key))
            if reserve is None or not reserve.resource_claims:
                continue
            choices = books.held_choices(reserve)
            if choices:
                found.released[node] = _Released(
                    reservation=key,
                    in_use=books.in_use.without(choices),
                    held=frozenset(choice.device.id for choice in choices),
                )
        return found.released

    def _fits(
        self,
        found: _PodClaims,
        node: str,
        *,
        labels: collections.abc.Mapping[str, str],
        specs: int,
    ) -> bool | allocator.Unallocatable | allocator.Failure:
        """Whether claims like the pod's can be allocated on ``node`` now: shared by pods
        whose claims have the same specs while the pools the node reaches do not change."""
        books = self._books()
        pools = books.pools_for(node, labels=labels)
        key = (specs, node, books.in_use.versions(p.id for p in pools))
        known = books.feasible.get(key)
        if known is not None:
            return known
        usage = books.in_use.base_usage(p.id for p in pools)
        kept = (
            self._answers.key(books.catalog, specs, node, usage=usage, pools=pools, labels=labels)
            if usage is not None
            else None
        )
        if kept is not None:
            known = self._answers.get(kept)
            if known is not None:
                books.feasible[key] = known
                return known
        if node in (found.released or {}):
            # What every pod sees here (the filter then asks again for this owner alone).
            outcome = allocator.allocate(
                found.to_allocate,
                node=node,
                pools=pools,
                catalog=books.catalog,
                in_use=books.in_use,
            )
        else:
            outcome = self._outcome(found, node, labels=labels)
        if isinstance(outcome, allocator.Failure):
            return outcome  # names this pod's claim: not shared
        answer: bool | allocator.Unallocatable = (
            True if isinstance(outcome, allocator.Allocated) else outcome
        )
        books.feasible[key] = answer
        if kept is not None:
            self._answers.put(kept, answer)
        return answer

    def _labels(self, node: str) -> collections.abc.Mapping[str, str]:
        info = self._handle.snapshot().node_infos.get(node)
        return info.labels if info is not None else {}

    def _feasibility(
        self, found: _PodClaims, nodes: nodetable.NodeTable
    ) -> ledger.Feasibility | allocator.Failure:
        """Where the pod's claims fit, row by row: the mask of pods with claims of the same
        specs, brought up to date by the rows whose pools changed since it was made."""
        books = self._books()
        names = nodes.names
        specs = self._answers.specs_id(found.specs)  # hashed once, not once per node
        known = books.masks.get(found.specs)
        if known is None or len(known.fits) != len(names):
            rows: collections.abc.Iterable[int] = range(len(names))
            current = ledger.Feasibility(
                fits=np.zeros(len(names), dtype=np.bool_), failures={}, seen=0
            )
        else:
            rows = books.rows_changed(
                known.seen,
                rows=lambda: (
                    (row, books.pools_for(name, labels=self._labels(name)))
                    for row, name in enumerate(names)
                ),
            )
            current = ledger.Feasibility(
                fits=known.fits.copy(), failures=dict(known.failures), seen=known.seen
            )
        for row in sorted(rows):
            name = names[row]
            outcome = self._fits(found, name, labels=self._labels(name), specs=specs)
            if isinstance(outcome, allocator.Failure):
                return outcome
            current.fits[row] = outcome is True
            if isinstance(outcome, allocator.Unallocatable):
                current.failures[row] = outcome
            else:
                current.failures.pop(row, None)
        current.seen = len(books.in_use.log)
        books.masks[found.specs] = current
        return current

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        found = state.read_as(_STATE, kind=_PodClaims)
        if isinstance(found, statuses.Status):
            raise RuntimeError(found.message())
        size = len(nodes)
        placed = np.ones(size, dtype=np.bool_)
        elsewhere: list[tuple[str, filtering.BoolArray]] = []
        for key, allocation in found.allocated:
            if allocation.node_selector is None:
                continue
            here = np.zeros(size, dtype=np.bool_)
            for term in allocation.node_selector:
                here |= nodes.term_mask(term)
            elsewhere.append((key, ~here))
            placed &= here
        passed = placed.copy()
        failures: dict[int, allocator.Unallocatable] = {}
        if found.to_allocate:
            released = self._release(found, pod)
            feasibility = self._feasibility(found, nodes)
            if isinstance(feasibility, allocator.Failure):
                return filtering.NodeFilter(
                    passed=np.zeros(size, dtype=np.bool_),
                    code=statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    reason=feasibility.reason,
                    reason_code=reasons.ReasonCode.RESOURCE_CLAIM_PROBLEM,
                )
            fits = feasibility.fits
            unmet = dict(feasibility.failures)
            if released:
                # Where a reservation holds devices for this owner, they are its to take.
                fits = fits.copy()
                for node in released:
                    row = nodes.index.get(node)
                    if row is None:
                        continue
                    mine = self._outcome(found, node, labels=self._labels(node))
                    if isinstance(mine, allocator.Failure):
                        continue  # the same failure anywhere: the mask said so already
                    fits[row] = isinstance(mine, allocator.Allocated)
                    if isinstance(mine, allocator.Unallocatable):
                        unmet[row] = mine
                    else:
                        unmet.pop(row, None)
            passed &= fits
            failures = {row: f for row, f in unmet.items() if placed[row]}
        contended = any(f.contended for f in failures.values())

        def explain() -> filtering.Reasons:
            out: dict[str, filtering.BoolArray] = {}

            def mark(
                text: str, row: int | None = None, rows: filtering.BoolArray | None = None
            ) -> None:
                into = out.setdefault(text, np.zeros(size, dtype=np.bool_))
                if rows is not None:
                    into |= rows
                if row is not None:
                    into[row] = True

            for key, rows in elsewhere:
                mark(
                    f"node(s) didn't match the node selector of resourceclaim {key}'s allocation",
                    rows=rows,
                )
            for row, failure in failures.items():
                mark(f"node(s) {self._why_not(found, nodes.names[row], failure)}", row=row)
                for broken in failure.broken:
                    mark(f"node(s) where {broken}", row=row)
            return out

        return filtering.NodeFilter(
            passed=passed,
            code=statuses.Code.UNSCHEDULABLE,
            explain=explain,
            reason_code=reasons.ReasonCode.NOT_ENOUGH_RESOURCES
            if contended
            else reasons.ReasonCode.DEVICES_UNAVAILABLE,
        )

    def _why_not(self, found: _PodClaims, node: str, failure: allocator.Unallocatable) -> str:
        """Which claim this node cannot serve (the first that fails alone, else all together),
        as what the node did: ``had too few free devices for resourceclaim ...``."""
        books = self._books()
        info = self._handle.snapshot().node_infos.get(node)
        pools, in_use = self._view(found, node, labels=info.labels if info else {})
        for claim in found.to_allocate:
            alone = allocator.allocate(
                (claim,), node=node, pools=pools, catalog=books.catalog, in_use=in_use
            )
            if isinstance(alone, allocator.Unallocatable):
                if alone.contended:
                    return f"had too few free devices for {_describe(claim)}"
                return f"had no devices matching {_describe(claim)}"
        listed = ", ".join(c.key for c in found.to_allocate)
        if failure.contended:
            return f"had too few free devices for resourceclaims {listed} together"
        return f"could not allocate resourceclaims {listed} together"

    # PostFilter -------------------------------------------------------------------------------
    def post_filter(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        *,
        reason: str,
    ) -> statuses.Status:
        if not self._active(pod):
            return statuses.SUCCESS
        found = state.read_as(_STATE, kind=_PodClaims)
        if isinstance(found, statuses.Status):
            return statuses.SUCCESS
        books = self._books()
        for key, allocation in found.allocated:
            if allocation.node_selector is None:
                continue
            here = np.zeros(len(nodes), dtype=np.bool_)
            for term in allocation.node_selector:
                here |= nodes.term_mask(term)
            if here.all():
                continue  # usable on every node considered: not what keeps the pod out
            claim = books.devices.claims.get(key)
            if claim is None or any(ref.uid != pod.uid for ref in claim.reserved_for):
                continue
            if books.users.get(key):
                continue  # a pod of this session reserved it
            self._freeing.setdefault(pod.key, (key, claim.uid))
            return statuses.new(
                statuses.Code.UNSCHEDULABLE,
                f"resourceclaim {key} is allocated where the pod cannot go and reserved by no "
                "other pod: it is deallocated, to be allocated again where the pod fits",
            )
        return statuses.SUCCESS

    # Reserve ----------------------------------------------------------------------------------
    def reserve(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        if not self._active(pod):
            return statuses.SUCCESS
        books = self._books()
        found = state.read_as(_STATE, kind=_PodClaims)
        if isinstance(found, statuses.Status) or found.version != books.version:
            # Placed without this attempt's PreFilter, or the session moved since: start over.
            resolved = self._resolve(pod)
            if isinstance(resolved, statuses.Status):
                return resolved
            found = resolved
            state.write(_STATE, found)
        self._release(found, pod)
        snapshot = self._handle.snapshot()
        info = snapshot.node_infos.get(node)
        labels = info.labels if info is not None else {}
        for key, allocation in found.allocated:
            if allocation.node_selector is not None and not any(
                selectors.matches(term, labels=labels, node_name=node)
                for term in allocation.node_selector
            ):
                return statuses.new(
                    statuses.Code.UNSCHEDULABLE,
                    f"resourceclaim {key} is allocated where node {node} is not",
                    reason_code=reasons.ReasonCode.DEVICES_UNAVAILABLE,
                    details={"claim": key},
                )
        allocations: tuple[allocator.ClaimAllocation, ...] = ()
        if found.to_allocate:
            outcome = self._outcome(found, node, labels=labels)
            if isinstance(outcome, allocator.Failure):
                return _problem(outcome.reason, claim=outcome.claim)
            if isinstance(outcome, allocator.Unallocatable):
                return statuses.new(
                    statuses.Code.UNSCHEDULABLE,
                    f"node {node} {self._why_not(found, node, outcome)}",
                    reason_code=reasons.ReasonCode.NOT_ENOUGH_RESOURCES
                    if outcome.contended
                    else reasons.ReasonCode.DEVICES_UNAVAILABLE,
                )
            allocations = outcome.allocations
        books.reserve(pod, allocations=allocations, reused=found.reused)
        return statuses.SUCCESS

    def unreserve(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> None:
        if pod.resource_claims and self._ledger is not None:
            self._ledger.unreserve(pod)

    # PreBind ----------------------------------------------------------------------------------
    def pre_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        if not self._active(pod) or pod.reserve:
            # A reserve pod's claims live in Berth alone: its Reservation records them.
            return statuses.SUCCESS
        books = self._books()
        known = books.devices.claims
        for key in pod.resource_claim_keys:
            claim = known.get(key)
            if claim is None or claim.reserved_for_pod(pod.uid):
                continue
            allocation: dra.AllocationResult | None = None
            after: str | None = None
            held = books.held.get(key)
            if claim.allocation is None:
                if held is None:
                    return statuses.new(
                        statuses.Code.ERROR,
                        f"resourceclaim {key} has no allocation to write for pod {pod.key}",
                    )
                if held.holder == pod.key:
                    allocation = held.allocation.result
                else:
                    after = held.holder.partition("/")[2]  # its PreBind came first
            recorder.record(
                decisions.ReserveClaim(
                    namespace=claim.namespace,
                    name=claim.name,
                    uid=claim.uid,
                    pod=pod.name,
                    pod_uid=pod.uid,
                    allocation=allocation,
                    after=after,
                )
            )
        return statuses.SUCCESS


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> DynamicResources:
    """Build the plugin (it takes no arguments)."""
    return DynamicResources(handle)
