"""Reservation: capacity held on one node for named owners, scheduled as a disguised pod.

After Koordinator's ``Reservation`` plugin (docs/architecture.md, "Plugins and profiles"). The cache
turns every Reservation into a *reserve pod* (:mod:`berth.scheduler.snapshot.reservations`):
a Pending one waits in its queue like any pod and is placed by the normal cycle (node
affinity, taints, fit, scores, its queue's quota); an Available one sits on its node holding
what its owners do not use, so every other pod sees that room as taken. This plugin does the
rest:

- **Bind** of a reserve pod records ``SetReservationAvailable`` (the sink writes ``Available``,
  ``nodeName``, ``allocatable``, ``devices`` — what the DynamicResources plugin allocated for
  the template's claims, from the session's ``claim_allocations`` hook —, the ``Scheduled``
  and ``Ready`` conditions and an Event)
  instead of a pod binding; other pods are ``SKIP``ped to the next binder.
- **Owners** (an owner entry matches the pod, in the reservation's namespace): PreFilter finds
  the reservations the pod may use (Available, not ``unschedulable``, not used up; only the
  one it names with the label ``scheduling.berth.io/reservation``, which it *must* use); the
  **FilterHook** hands one reservation's unused capacity per node back to that pod's view of
  the node (and the session's ``reservation_rows`` hook tells the DynamicResources plugin
  which reservation's held devices are the pod's on which node); **Score** gives 100 to
  those nodes (0 elsewhere); **Reserve** charges the pod to
  that reservation — what the reservation still holds shrinks by the part of the pod's
  requests it covers, and an ``allocateOnce`` reservation lets go of the rest at once —
  (Unreserve undoes it); **PreBind** records the pod's ``reservation-allocated`` annotation
  and **PostBind** ``AllocateReservation`` (``currentOwners``, ``allocated``, and
  ``Succeeded`` for an allocate-once reservation).
- **Generic hooks** (docs/architecture.md, "Plugins and profiles"): reserve pods are the
  session's ``reserve_pods`` (they hold room, no other pod's constraints count them, no node is
  nominated for them), ``reported_as`` their Reservation (where their "why pending" goes),
  never ``evictable``, and ``unsignable`` with the owners naming a reservation; labels
  join the signature (``labels_in_signature``) while reservations exist.
- **Same session**: the plugin answers the session's ``job_first`` hook for reserve pods, so
  the allocate action places them before any other pod, and
  PostBind of a reserve pod makes its reservation Available in this session's books, so an
  owner applied together with its Reservation goes into it in the same cycle (Koordinator
  schedules reservations first for the same reason).
- **Queues**: a reserve pod is a pod of the reservation's queue, so what a reservation holds
  counts against that queue like running pods. An owner of the same queue is not counted
  twice: when its queue would refuse it, the session's ``reserved_credit`` hook answers with
  the pod's requests if reservations of that queue each cover all of them, and the pod is
  then placed only into one of those.
- **Lifetime**, at session open: a reservation whose ``ttl``/``expires`` has passed is ended
  (``Expired`` while it held capacity, ``Failed`` if it never got placed), and so is one whose
  node is gone (``Failed``); the cache already stopped counting its capacity.
- **Booked for later** (``startAt``): before it, PreEnqueue keeps the reserve pod out of the
  cycle with the reason ``NotStarted`` ("starts at …", and the node the starvation guard drains
  for it once it does, :mod:`berth.scheduler.plugins.proportion.starvation`); the session is
  looked at again when it starts (``revisit_at``), and from then on it is placed like any
  reservation.
- **Bad input**, as the reservation's ``Scheduled`` condition (the session reports a reserve
  pod's "why pending" on its Reservation): a template without requests, owners that can never
  match a pod (PreEnqueue keeps such a reservation out of the cycle), a size no node offers.
- ``GET /berth/v1/plugins/Reservation/nodeReservations/{node}``: the reservations held on a
  node as the last session left them.

Everything per session lives in :class:`berth.scheduler.plugins.reservation.books.Books` (owner
matching, charging, lifetime, the route's listing), built at open and dropped at close (R8).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import threading

import numpy as np

from berth.api import keys, resources
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
from berth.scheduler.plugins.reservation import books as reservation_books
from berth.scheduler.snapshot import nodetable, pods, snapshots
from berth.scheduler.snapshot import reservations as resv

__all__ = [
    "MATCHES_KEY",
    "NAME",
    "ROUTE",
    "Matches",
    "Reservation",
    "get_matches",
    "new",
]

NAME = names.RESERVATION


def _holds_capacity(job: jobs.Job) -> bool:
    """Whether ``job`` is a Reservation's reserve pod (a group of one of its own)."""
    return any(pod.reserve for pod in job.pending)


def _reported_as(pod: pods.PodInfo) -> tuple[decisions.Subject, str] | None:
    """A reserve pod's "why pending" is its Reservation's (the sink writes its condition)."""
    if pod.reserve and pod.reservation is not None:
        return decisions.Subject.RESERVATION, str(pod.reservation)
    return None


def _unsignable(pod: pods.PodInfo) -> bool:
    """A pod naming a reservation, or standing for one: more than its shape decides where it
    goes."""
    return pod.reservation is not None or pod.reserve


def _reserve_pods(snapshot: snapshots.Snapshot) -> set[str]:
    """The keys of the snapshot's reserve pods (one per Reservation the cache holds)."""
    return {resv.reserve_pod_key(key) for key in snapshot.reservations}


MATCHES_KEY = cyclestate.StateKey(f"{NAME}/matches")
ROUTE = "nodeReservations/{node}"
"""Served at ``/berth/v1/plugins/Reservation/nodeReservations/{node}``."""


@dataclasses.dataclass
class Matches:
    """Cycle state of one owner pod's attempt: the reservation its view uses on each row."""

    by_row: dict[int, str]  # row -> reservation key
    must: str | None = None  # why the pod may go only to these rows (it names one, ...)

    def clone(self) -> Matches:
        return Matches(dict(self.by_row), self.must)


def get_matches(state: cyclestate.CycleState) -> Matches | statuses.Status | None:
    """The typed getter (R8): ``None`` when PreFilter found no reservation for the pod, an
    ``ERROR`` status when something else sits under the key."""
    if MATCHES_KEY not in state:
        return None
    return state.read_as(MATCHES_KEY, kind=Matches)


def _matches(state: cyclestate.CycleState) -> Matches | None:
    """:func:`get_matches` for the points that cannot answer with a status (they raise, and
    the runtime reports the error under this plugin's name)."""
    found = get_matches(state)
    if isinstance(found, statuses.Status):
        raise TypeError(found.message())
    return found


class Reservation(
    interfaces.SessionPlugin,
    interfaces.PreEnqueuePlugin,
    interfaces.PreFilterPlugin,
    interfaces.FilterHook,
    interfaces.FilterPlugin,
    interfaces.PreScorePlugin,
    interfaces.ScorePlugin,
    interfaces.ReservePlugin,
    interfaces.PreBindPlugin,
    interfaces.BindPlugin,
    interfaces.PostBindPlugin,
    interfaces.APIServiceProvider,
):
    """Session plugin, PreEnqueue, PreFilter, FilterHook, Filter, PreScore, Score, Reserve,
    PreBind, Bind, PostBind, and a route."""

    name = NAME

    def __init__(self) -> None:
        self._books: reservation_books.Books | None = None
        self._published: dict[str, list[interfaces.JSONValue]] = {}
        self._nodes: collections.abc.Container[str] = ()  # the nodes the last session saw
        self._lock = threading.Lock()  # the route reads from the event loop, sessions write

    # Session ---------------------------------------------------------------------------------
    def on_session_open(self, session: sessions.Session) -> None:
        books = self._books = reservation_books.Books(session)
        session.recorder.extend(books.endings)
        session.hooks.reserved_credit.add(books.credit, plugin=NAME)
        session.hooks.reservation_rows.add(lambda pod: books.rows.get(pod.key), plugin=NAME)
        session.hooks.job_first.add(_holds_capacity, plugin=NAME)
        # A reserve pod holds room but is no pod others see, evict (a Reservation ends by its
        # lifetime or its deletion) or a node is nominated for, and its reason goes on its
        # Reservation.
        session.hooks.reserve_pods.update(_reserve_pods(session.snapshot))
        session.hooks.reported_as.add(_reported_as, plugin=NAME)
        # Owners are matched by name and by label selectors: no class for pods naming one,
        # and labels are part of every class while reservations exist.
        session.hooks.unsignable.add(_unsignable, plugin=NAME)
        if session.snapshot.reservations:
            session.hooks.labels_in_signature.add(lambda: True, plugin=NAME)
        # A reservation booked for later (``startAt``) is looked at again when it starts.
        session.hooks.revisit_at.add(books.starts_at, plugin=NAME)
        session.hooks.cycle_revisit_at.add(books.next_start, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        books, self._books = self._books, None
        if books is None or books.session is not session:
            return
        published = books.publish()
        with self._lock:
            self._published, self._nodes = published, session.snapshot.node_infos

    # Queueing ---------------------------------------------------------------------------------
    def pre_enqueue(self, pod: pods.PodInfo) -> statuses.Status:
        books = self._books
        if not pod.reserve or pod.reservation is None or books is None:
            return statuses.SUCCESS
        info = books.reservation(pod.reservation)
        problem = resv.owners_problem(info) if info is not None else None
        if problem is not None:
            return statuses.new(
                statuses.Code.PENDING,
                problem,
                reason_code=reasons.ReasonCode.INVALID,
                details={"field": "spec.owners"},
            )
        if info is not None and resv.not_started(info, now=books.session.snapshot.now):
            return books.not_started(info, pod=pod)
        return statuses.SUCCESS

    # Filtering ---------------------------------------------------------------------------------
    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        books = self._books
        if books is None or pod.reserve:
            return statuses.SKIP
        books.rows.pop(pod.key, None)
        named = str(pod.reservation) if pod.reservation is not None else None
        if named is not None:
            status, held = books.named_status(pod, named)
            if held is None:
                return status
            must = f"pod must use reservation {named.partition('/')[2]}"
            self._write(state, pod, nodes, Matches({held.row: named}, must=must))
            return statuses.SUCCESS
        credited = books.credited.get(pod.key)
        if credited is not None:
            # Its queue admitted it on the room these reservations hold: only there.
            names_ = ", ".join(key.partition("/")[2] for key in credited)
            must = f"pod was admitted to queue {pod.queue} on the room of reservation {names_}"
            held_ = [books.held[key] for key in credited if books.held[key].takes_owners]
            if not held_:
                return reservation_books.unschedulable(
                    f"{must}, which holds nothing any more", reservation=", ".join(credited)
                )
            self._write(state, pod, nodes, Matches(books.choose(pod, held_), must=must))
            return statuses.SUCCESS
        usable = books.candidates(pod)
        if usable:
            self._write(state, pod, nodes, Matches(books.choose(pod, usable)))
        # Only a pod naming a reservation is restricted by the Filter.
        return statuses.SKIP

    def _write(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        matches: Matches,
    ) -> None:
        """Keep ``matches`` for this attempt, and by node name for ``reservation_rows``."""
        state.write(MATCHES_KEY, matches)
        if self._books is not None:
            rows = {str(nodes.names[row]): key for row, key in matches.by_row.items()}
            self._books.rows[pod.key] = rows

    def filter_hook(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> nodetable.NodeTable | None:
        books, matches = self._books, _matches(state)
        if books is None or matches is None or not matches.by_row:
            return None
        view = nodes.copy()
        for row, key in matches.by_row.items():
            view.requested[row] -= books.held[key].remaining
        return view

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        matches = _matches(state)
        if matches is None or matches.must is None:
            return filtering.passing(len(nodes))
        passed = np.zeros(len(nodes), dtype=np.bool_)
        for row in matches.by_row:
            passed[row] = True
        where = ", ".join(nodes.names[row] for row in sorted(matches.by_row))
        return filtering.NodeFilter(passed=passed, reason=f"{matches.must}, held on {where}")

    # Scoring ---------------------------------------------------------------------------------
    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        matches = get_matches(state)
        if isinstance(matches, statuses.Status):
            return matches
        return statuses.SUCCESS if matches is not None and matches.by_row else statuses.SKIP

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        scores = np.zeros(len(nodes), dtype=np.int64)
        matches = _matches(state)
        if matches is not None:
            scores[list(matches.by_row)] = interfaces.MAX_NODE_SCORE
        return scores

    def score_extensions(self) -> interfaces.ScoreExtensions | None:
        return None

    # Reserve -----------------------------------------------------------------------------------
    def reserve(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        books, matches = self._books, get_matches(state)
        if isinstance(matches, statuses.Status):
            return matches
        if books is None or matches is None or pod.reserve:
            return statuses.SUCCESS
        key = matches.by_row.get(books.table.index[node])
        if key is not None:
            books.charge(pod, books.held[key])
        return statuses.SUCCESS

    def unreserve(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> None:
        books = self._books
        if books is not None:
            books.uncharge(pod)

    # Binding -----------------------------------------------------------------------------------
    def pre_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        books = self._books
        charge = books.charges.get(pod.key) if books is not None else None
        if charge is not None:
            recorder.record(
                decisions.AnnotatePod(
                    namespace=pod.namespace,
                    name=pod.name,
                    uid=pod.uid,
                    annotations={
                        keys.RESERVATION_ALLOCATED_ANNOTATION: resv.allocated_annotation(
                            charge.held.info
                        )
                    },
                )
            )
        return statuses.SUCCESS

    def bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        if not pod.reserve or pod.reservation is None:
            return statuses.SKIP
        namespace, _, name = str(pod.reservation).partition("/")
        allocatable = resources.ResourceList(
            {k: v for k, v in pod.requests.items() if k != resources.PODS}
        )
        books = self._books
        info = books.reservation(str(pod.reservation)) if books is not None else None
        allocations = books.session.hooks.claim_allocations(pod) if books is not None else None
        recorder.record(
            decisions.SetReservationAvailable(
                namespace=namespace,
                name=name,
                node=node,
                allocatable=allocatable,
                devices=resv.held_devices(allocations, info) if allocations and info else (),
            )
        )
        return statuses.SUCCESS

    def post_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> None:
        books = self._books
        if books is not None and pod.reserve and pod.reservation is not None:
            # After every Bind of the statement succeeded: the reservation is placed for good.
            books.hold(pod, node)
            return
        charge = books.charges.get(pod.key) if books is not None else None
        if charge is None:
            return
        info = charge.held.info
        held = resv.held(info)
        recorder.record(
            decisions.AllocateReservation(
                namespace=info.namespace,
                name=info.name,
                owner=pod.name,
                owner_uid=pod.uid,
                requests=resources.ResourceList(
                    {k: v for k, v in pod.requests.items() if k in held and k != resources.PODS}
                ),
                succeeded=info.allocate_once,
            )
        )

    # Route ---------------------------------------------------------------------------------
    def routes(self) -> collections.abc.Sequence[interfaces.Route]:
        return [interfaces.Route(method="GET", path=ROUTE, handler=self._node_reservations)]

    def _node_reservations(self, request: interfaces.RouteRequest) -> interfaces.JSONValue:
        node = request.path_params["node"]
        with self._lock:
            if node not in self._nodes:
                raise KeyError(node)  # an unknown node is a 404
            entries = self._published.get(node, [])
        return {"node": node, "reservations": list(entries)}


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> Reservation:
    """Build the plugin (it takes no arguments)."""
    return Reservation()
