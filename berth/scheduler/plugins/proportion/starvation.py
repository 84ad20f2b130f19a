"""The starvation guard: a job below quorum whose group waited ``starvationThresholdSeconds``
while its queue has room left in its share gets nodes nominated, and what is free there is
held for it (the ``job_starving`` and ``nominations`` hooks and a node predicate).

EASY backfill: held room may go to a pod expected to end before the held job could start
(its *shadow time*, when the pods on its nodes are expected to end). Both ends come from
:func:`~berth.scheduler.snapshot.runtimes.estimate_end`: declared run times, else the run
times of the finished pods of the pod's queue — their median
(:data:`~.holds.SHADOW_QUANTILE`) for the pods the job waits on, a cautious
:data:`~.holds.BACKFILL_QUANTILE` for a pod that would backfill.

The cost is said and can be bounded: the held room is in the job's reason ("8 nvidia.com/gpu
idle meanwhile"), and a job held for longer than ``drainTimeoutSeconds`` (the second
threshold, counted from the cycle its hold began; off by default) gives the room back, its
reason says so, and it is not held for again until as long after
(:class:`~.holds.GivenBack`).

A drain is bounded too: once a gang's hold has drained for ``drainPreemptSeconds`` (three
hours by default) the gang may take back what still runs on its nodes (:meth:`drained`; the
rules of what it may take are reclaim's, :mod:`~.reclaim`), and that time is the hold's
shadow when no estimate ends earlier. A gang whose queue's share left no room for a hold is
held for anyway once it has waited that long past its threshold (:meth:`overdue`: before
other starving jobs, and it takes its nodes back at once), so that no gang waits much longer
than the threshold and one drain. The nodes chosen while this is on are, first, those no
gang placed across other nodes runs on (a gang is taken back whole or not at all).

A Reservation booked for later (``spec.startAt``) is drained for the same way, from
``reservationDrainSeconds`` before it starts: its reserve pod counts as starving, a node is
chosen and what frees there is held, and only work expected to end by ``startAt`` backfills
it (its shadow time is ``startAt`` itself, whatever runs there). Its queue's share does not
bound the hold (the booking was made for that time; its queue's quota still decides at
placement), no ``drainTimeoutSeconds`` gives it back, and the reservation's expiry ends it.

:class:`StarvationGuard` reads the books it is built with and asks admission whether a queue
is usable; what it keeps across cycles (:class:`~.holds.Memory`: when each hold began, the
nodes held last, the shadow times promised, the holds given back) is the plugin's, handed to it
at each session open."""

from __future__ import annotations

import collections
import math
import typing

import numpy as np
import numpy.typing as npt

from berth.api import resources
from berth.scheduler.framework import filtering, handles, hooks, jobs, sessions, statuses
from berth.scheduler.plugins.proportion import accounting, holds
from berth.scheduler.plugins.proportion import admission as admission_
from berth.scheduler.plugins.proportion import args as arguments
from berth.scheduler.plugins.proportion import tree as trees
from berth.scheduler.snapshot import ids, nodetable, pods, reservations, runtimes

__all__ = ["MAX_HOLDERS", "StarvationGuard"]

IntArray = accounting.IntArray
MAX_HOLDERS = 8
"""Starving jobs that hold capacity at once (each costs one simulated placement per pod)."""


class StarvationGuard:
    """The starvation guard over the books (``books``); whether a queue is usable at all is
    admission's answer (``admission``). ``memory`` is the plugin's, kept across sessions."""

    def __init__(
        self,
        books: accounting.Accounting,
        *,
        admission: admission_.Admission,
        args: arguments.ProportionArgs,
        memory: holds.Memory,
        handle: handles.ExtendedHandle,
    ) -> None:
        self.books = books
        self.session = books.session
        self._handle = handle  # the framework's services: where a pod would go
        self.admission = admission
        self.args = args
        self.threshold = args.starvation_threshold_seconds or None
        self.drain_timeout = args.drain_timeout_seconds if self.threshold is not None else None
        self.drain_preempt = args.preempt_after
        self.memory = memory  # the holds' starts, nodes and shadows; the holds given back
        self.holds: list[holds.Hold] = []
        # Per queue, the first MAX_HOLDERS starving jobs in the guard's order: whoever it
        # holds for now, or would next, is among them (the rest may wait parked).
        self.contenders: set[str] = set()
        self._hopeless_jobs: dict[str, bool] = {}
        self._smallest_pods: dict[str, IntArray] = {}
        self._free_at_open: IntArray | None = None  # free capacity before holds (held_idle)
        self._smallest_job: float | None = None  # _smallest_running, once asked

    def _hopeless(self, job: jobs.Job) -> bool:
        """The job's quorum exceeds its queue's share or a limit even with the queue empty,
        or fewer of its pending pods than it still needs fit on the largest node even
        emptied: holding room for it would only waste the room. A job the nodes cannot take
        is no more starving than it is waiting for room (a bigger node, e.g. one an
        autoscaler adds, makes it hopeful again), and it must not take a place in its
        queue's line of :data:`MAX_HOLDERS` from a job the guard can help."""
        books = self.books
        found = self._hopeless_jobs.get(job.key)
        if found is None:
            need = books.quorum_need(job)
            path, i = books.paths[job.queue], books.index[job.queue]
            found = bool(
                (need > books.share[i]).any()
                or (need > books.limit[path]).any()
                or self.session.too_big_for_any_node(job)
            )
            self._hopeless_jobs[job.key] = found
        return found

    def _smallest(self, job: jobs.Job) -> IntArray:
        """The job's smallest pending pod (by summed milli-units), cached for the session."""
        books = self.books
        found = self._smallest_pods.get(job.key)
        if found is None:
            vectors = [books.vector(p) for p in job.pending]
            found = self._smallest_pods[job.key] = min(vectors, key=lambda v: int(v.sum()))
        return found

    def revisit_at(self, job: jobs.Job) -> float | None:
        """When time alone changes what this plugin says of ``job`` itself: it passes the
        starvation threshold (counted from its creation). A parked job wakes then, so that
        the guard sees it."""
        now = self.session.snapshot.now
        times = [math.inf]
        if self.threshold is not None and job.creation_timestamp + self.threshold > now:
            times.append(job.creation_timestamp + self.threshold)
        overdue = self._overdue_at(job)
        if overdue is not None and overdue > now:
            times.append(overdue)  # held for from then on, room or not
        drain = self.drain_begins(job)
        if drain is not None:
            times.append(drain)
        kept = self.memory.holding.get(job.key)
        if kept is not None and self.drain_preempt is not None:
            preempts = kept.since + self.drain_preempt  # reclaim may take the rest then
            if preempts > now:
                times.append(preempts)
        if self.args.usage_half_life_seconds:
            # Decayed shares drift with time alone, and which waiting jobs the guard holds
            # room for follows them: every such job is looked at every cycle.
            times.append(now)
        found = min(times)
        return found if found < math.inf else None

    def booking(self, job: jobs.Job) -> reservations.ReservationInfo | None:
        """The Reservation booked for later whose reserve pod ``job`` is, once its drain has
        begun (``reservationDrainSeconds`` before its ``startAt``); ``None`` otherwise."""
        snapshot = self.session.snapshot
        for pod in job.pending:
            if not pod.reserve or pod.reservation is None or pod.invalid:
                continue
            info = snapshot.reservations.get(str(pod.reservation))
            if info is None or info.start_at is None or info.terminal or info.invalid:
                continue
            if snapshot.now >= info.start_at - self.args.reservation_drain_seconds:
                return info
        return None

    def drain_begins(self, job: jobs.Job) -> float | None:
        """When the drain for a reservation booked for later begins, while it is ahead."""
        snapshot = self.session.snapshot
        for pod in job.pending:
            info = (
                snapshot.reservations.get(str(pod.reservation))
                if pod.reserve and pod.reservation is not None
                else None
            )
            if info is not None and info.start_at is not None and not info.terminal:
                begins = info.start_at - self.args.reservation_drain_seconds
                if begins > snapshot.now:
                    return begins
        return None

    def next_drain(self) -> float | None:
        """When the first drain for a reservation booked for later begins (the session's
        revisit: nothing else may change then)."""
        snapshot = self.session.snapshot
        lead = self.args.reservation_drain_seconds
        times = [
            info.start_at - lead
            for info in snapshot.reservations.values()
            if info.start_at is not None
            and not info.terminal
            and info.start_at - lead > snapshot.now
        ]
        return min(times, default=None)

    def starving(self, job: jobs.Job) -> bool:
        """Waited past the threshold, below quorum, and its queue has room left in its share
        (and limits) for what the job asks: the guard holds only room the queue is entitled
        to, so it never overrides the weighted split, while the room the queue's own smaller
        work gives back as it finishes accumulates for the starving job. A job that gave
        its room back past ``drainTimeoutSeconds`` is not starving for as long again. A
        reservation booked for later is starving from its drain's start (module docstring)."""
        books = self.books
        if self.booking(job) is not None:
            return True
        if self.drain_begins(job) is not None:
            return False  # booked for later: nothing is held for it before its drain
        if self.threshold is None or job.occupied() >= job.group.min_member:
            return False
        if self.session.snapshot.now - job.creation_timestamp < self.threshold:
            return False
        if (
            not job.pending
            or not self.admission.queue_problem(job.queue, running=True).is_success()
        ):
            return False
        gave = self.memory.given_back.get(job.key)
        if gave is not None and self.session.snapshot.now < gave.at + gave.held_for:
            return False  # it gave its room back: the others have it for as long
        # The room left in the queue's share first: cached per queue, it answers most jobs
        # of a long backlog before the costlier questions below.
        i = books.index[job.queue]
        room = books.room(i)
        asked = self._smallest(job) > 0
        if not (room[asked] > 0).all() and not self.overdue(job):
            return False
        if self._hopeless(job):
            return False
        # e.g. a group backing off after its schedule timeout holds nothing
        return self.session.hooks.job_valid(job).is_success()

    def contending(self, job: jobs.Job) -> bool:
        """Whether ``job`` is among the first :data:`MAX_HOLDERS` starving jobs of its queue
        in the guard's order: every job held for is, and so is every job the guard would hold
        for next whichever queues' standing moves; a starving job further back may wait
        parked until one of those leaves (:mod:`~berth.scheduler.framework.parking`)."""
        return job.key in self.contenders

    def overdue(self, job: jobs.Job) -> bool:
        """A gang that waited ``drainPreemptSeconds`` past the starvation threshold: held for
        from then on even while its queue has no room left in its share (its queue's own
        work would otherwise keep it waiting for as long as that runs), and what runs on the
        nodes held for it may be taken back at once (:meth:`drained`), so that no gang waits
        much longer than the threshold and one drain."""
        at = self._overdue_at(job)
        return at is not None and self.session.snapshot.now >= at and self._outsizes(job)

    def _outsizes(self, job: jobs.Job) -> bool:
        """Something smaller than ``job`` runs: what it could take back (reclaim takes only
        smaller jobs for it). Without it, holding room past its queue's share would only
        keep that room idle until peers end."""
        books = self.books
        return books.dominant(books.quorum_need(job)) > self._smallest_running()

    def _overdue_at(self, job: jobs.Job) -> float | None:
        """When ``job`` becomes :meth:`overdue`, counted from its oldest pending pod's
        creation (a job started over, its pods evicted and made again, waits afresh);
        ``None`` without ``drainPreemptSeconds`` and for a job of one pod, which starts as
        any one pod frees: no drain needed."""
        if self.threshold is None or self.drain_preempt is None or not job.pending:
            return None
        if job.group.min_member < 2:
            return None
        since = min(p.creation_timestamp for p in job.pending)
        return since + self.threshold + self.drain_preempt

    def _smallest_running(self) -> float:
        """The smallest job running, by :meth:`~.accounting.Accounting.job_size` (``inf``
        when none runs); worked out once a session."""
        if self._smallest_job is None:
            books = self.books
            sizes = (
                books.job_size(pod.pod_group, pod)
                for pod in self.session.snapshot.pods.values()
                if pod.node_name is not None and not pod.terminal
            )
            self._smallest_job = min(sizes, default=math.inf)
        return self._smallest_job

    def take_holds(self) -> None:
        """Nominate nodes for each starving job's pods and hold what is free there, within
        the room left in its queue's share (module docstring)."""
        books = self.books
        session = self.session
        candidates = [
            job
            for job in session.jobs.values()
            if job.group.created >= job.group.min_member and self.starving(job)
        ]
        # Bookings first (their time was promised), then the overdue jobs, longest waiting
        # first (their wait is what is bounded), then the queue furthest below its share,
        # as allocate would serve them.
        booked = {job.key: info for job in candidates if (info := self.booking(job)) is not None}
        overdue = {job.key for job in candidates if self.overdue(job)}
        candidates.sort(
            key=lambda j: (
                j.key not in booked,
                j.key not in overdue,
                (self._overdue_at(j) or 0.0) if j.key in overdue else 0.0,
                books.ratio(books.index[j.queue]),
                -j.priority,
                j.creation_timestamp,
                j.uid,
                j.key,
            )
        )
        per_queue: collections.Counter[str] = collections.Counter()
        for job in candidates:  # within a queue the order above is the queue's own line
            if per_queue[job.queue] < MAX_HOLDERS:
                per_queue[job.queue] += 1
                self.contenders.add(job.key)
        now = session.snapshot.now
        live = {job.key for job in candidates}
        groups = session.snapshot.pod_groups
        holding = self.memory.holding
        for key in [k for k in holding if k not in live]:
            # Started or gone. A job still below quorum keeps its hold's start while it is
            # not held (left out of this session, or its queue's room taken for a while):
            # the drain's clocks do not start again each time its hold lapses.
            group = groups.get(typing.cast("ids.PodGroupKey", key))
            if group is None or group.placed >= group.min_member:
                del holding[key]
        if not candidates:
            return
        table = session.nodes
        free = np.clip(table.free(), 0, None)  # free now and not held yet
        self._free_at_open = free.copy()
        # The nodes as if emptied of what runs there: a pod's target is where it fits once
        # that frees, besides the pods already targeted (each counted whole).
        emptied = table.copy()
        emptied.requested[:] = 0  # a private copy nothing has read yet
        scorer = hooks.NodeScores()
        scorer.add(holds.fits_now_scorer(free), plugin=accounting.NAME)
        if self.drain_preempt is not None:
            scorer.add(holds.takeable_scorer(self._takeable()), plugin=accounting.NAME)
        # A booking prefers, above all, a node whose pods are expected to end by its startAt.
        booking_scorers: dict[float, hooks.NodeScores] = {}
        for info in booked.values():
            start = typing.cast("float", info.start_at)
            if start not in booking_scorers:
                booking_scorers[start] = hooks.NodeScores()
                booking_scorers[start].add(holds.fits_now_scorer(free), plugin=accounting.NAME)
                booking_scorers[start].add(
                    holds.on_time_scorer(self._empty_by(start)), plugin=accounting.NAME
                )
        planned = books.allocated.copy()  # usage if every hold so far became placements
        width = len(table.resources)  # holds are on nodes: the books' device columns aside
        for job in candidates[:MAX_HOLDERS]:
            booking = booked.get(job.key)
            kept = holding.get(job.key)  # held for in an earlier cycle
            timeout = self.drain_timeout
            if booking is not None:
                timeout = None  # a booking's drain ends with the reservation
            if kept is not None and timeout is not None and now - kept.since >= timeout:
                del holding[job.key]
                self.memory.given_back[job.key] = holds.GivenBack(
                    at=now, held_for=now - kept.since, nodes=kept.nodes
                )
                continue
            path, i = books.paths[job.queue], books.index[job.queue]
            room = np.maximum(books.room_under(i, used=planned), 0)
            if booking is not None or self.overdue(job):
                room = np.full_like(room, np.iinfo(np.int64).max // 4)
            wanted = job.group.min_member - job.occupied()
            held = np.zeros_like(table.requested)
            targets: dict[str, str] = {}
            failed: set[tuple[object, object]] = set()
            scores = (
                scorer
                if booking is None
                else booking_scorers[typing.cast("float", booking.start_at)]
            )
            for pod in sorted(
                job.pending, key=lambda p: (-p.priority, p.creation_timestamp, p.key)
            ):
                shape = (pod.signature, pod.requests)
                if len(targets) >= wanted or shape in failed:
                    continue
                attempt = self._handle.find_node(
                    pod, nodes=emptied, node_scores=scores, explain=False
                )
                if attempt.row is None:
                    failed.add(shape)
                    continue
                row = attempt.row
                vec = emptied.vector(pod.requests)
                emptied.assume(row, vec)
                take = np.minimum(np.minimum(vec, free[row]), room[:width])
                held[row] += take
                free[row] -= take
                room = room.copy()
                room[:width] -= take
                targets[pod.key] = table.names[row]
            if targets:
                nodes = len(set(targets.values()))
                if kept is None:
                    holding[job.key] = holds.Holding(since=now, nodes=nodes)
                else:
                    kept.nodes = nodes
                planned[path, :width] += held.sum(axis=0)
                self.holds.append(
                    holds.Hold(
                        job=job,
                        amounts=held,
                        rows=np.asarray(held.any(axis=1)),
                        targets=targets,
                        shadow=holds.UNKNOWN if booking is None else booking.start_at,
                        basis="" if booking is None else "its reservation's startAt",
                        booked=booking is not None,
                    )
                )

    def _takeable(self) -> npt.NDArray[np.bool_]:
        """Per row of the node table: whether no pod there belongs to a gang with members
        placed on other nodes (so the node can be taken back on its own)."""
        snapshot = self.session.snapshot
        table = self.session.nodes
        where: dict[str, set[str]] = collections.defaultdict(set)
        for node in table.names:
            for pod in snapshot.pods_on(node):
                if pod.pod_group is not None:
                    where[pod.pod_group].add(node)
        split = {node for nodes in where.values() if len(nodes) > 1 for node in nodes}
        return np.asarray([node not in split for node in table.names], dtype=np.bool_)

    def _empty_by(self, start: float) -> npt.NDArray[np.bool_]:
        """Per row of the node table: whether every pod there is expected to have ended by
        ``start`` (the median of what is known, as for a shadow time; unknown ends never)."""
        snapshot = self.session.snapshot
        table = self.session.nodes
        out = np.zeros(len(table), dtype=np.bool_)
        for row, node in enumerate(table.names):
            ends = [
                self._ends(p, quantile=holds.SHADOW_QUANTILE).end for p in snapshot.pods_on(node)
            ]
            out[row] = all(end is not None and end <= start for end in ends)
        return out

    def held_idle(self) -> dict[str, resources.ResourceList]:
        """Per queue, the held room still free as the session leaves the nodes: free at
        open less what the session bound there, up to each hold's amounts (room taken by a
        nomination stays idle until its pod binds). Empty without holds."""
        if not self.holds or self._free_at_open is None:
            return {}
        session = self.session
        table = session.nodes
        free = self._free_at_open.copy()
        for key, node in session.placed.items():
            pod = session.snapshot.pods.get(key)
            row = table.index.get(node)
            if pod is not None and row is not None:
                free[row] -= table.vector(pod.requests)
        free = np.clip(free, 0, None)
        totals: dict[str, IntArray] = {}
        for hold in self.holds:
            if hold.job.committed:
                continue
            idle = np.minimum(hold.amounts, free)
            free -= idle
            summed = idle.sum(axis=0)
            found = totals.get(hold.job.queue)
            totals[hold.job.queue] = summed if found is None else found + summed
        return {
            queue: resources.ResourceList(
                {
                    name: int(amount)
                    for name, amount in zip(table.resources, total.tolist(), strict=True)
                    if amount > 0 and name != resources.PODS
                }
            )
            for queue, total in totals.items()
            if (total > 0).any()
        }

    def drained(self, job: jobs.Job) -> frozenset[str] | None:
        """The nodes held for ``job`` once what runs there may be taken back for it
        (:mod:`~.reclaim`): its hold drained for ``drainPreemptSeconds`` (counted from the
        cycle it began), or the job is :meth:`overdue` (it waited that long past the
        threshold already, unheld while its queue had no room). ``None`` before then,
        without a hold, and for a reservation's booking (its drain ends at its
        ``startAt``)."""
        if self.drain_preempt is None:
            return None
        kept = self.memory.holding.get(job.key)
        if kept is None:
            return None
        waited = self.session.snapshot.now - kept.since
        if waited < self.drain_preempt and not self.overdue(job):
            return None
        for hold in self.holds:
            if hold.job is job and not hold.booked:
                return frozenset(hold.targets.values())
        return None

    def takes_back_at(self, hold: holds.Hold) -> float | None:
        """When the job of ``hold`` may take back what runs on its nodes (:meth:`drained`);
        ``None`` for a booking, or without ``drainPreemptSeconds``."""
        kept = self.memory.holding.get(hold.job.key)
        if self.drain_preempt is None or hold.booked or kept is None:
            return None
        at = kept.since + self.drain_preempt
        overdue = self._overdue_at(hold.job)
        if overdue is not None and self._outsizes(hold.job):
            at = min(at, overdue)
        return max(at, self.session.snapshot.now)

    def nominations(self, job: jobs.Job) -> dict[str, str]:
        """The nodes the guard nominated for a starving job's pods (pod key -> node)."""
        for hold in self.holds:
            if hold.job is job:
                return dict(hold.targets)
        return {}

    def shadow(self, hold: holds.Hold) -> float | None:
        """When the held job could start at the latest: once every pod on the nodes held for
        it has ended as estimated (EASY backfill's shadow time: declared run times, else the
        median of those learned from finished pods of its queue, :mod:`..runtimes`), or when
        it may take back what is left there (:meth:`takes_back_at`), whichever is first;
        ``None`` when nothing bounds it (then nobody backfills into the hold)."""
        if hold.shadow is holds.UNKNOWN:
            snapshot = self.session.snapshot
            latest: float | None = snapshot.now
            used: collections.Counter[str] = collections.Counter()
            for node in sorted(set(hold.targets.values())):
                for pod in snapshot.pods_on(node):
                    estimate = self._ends(pod, quantile=holds.SHADOW_QUANTILE)
                    if estimate.end is None:
                        latest = None
                        hold.basis = f"pod {pod.key}: {estimate.describe()}"
                        break
                    used[estimate.describe()] += 1
                    latest = max(latest, estimate.end) if latest is not None else None
                if latest is None:
                    break
            if latest is not None:
                hold.basis = (
                    "run times: "
                    + ", ".join(f"{count} {how}" for how, count in sorted(used.items()))
                    if used
                    else "nothing runs there"
                )
            takes_back = self.takes_back_at(hold)
            if takes_back is not None and (latest is None or takes_back < latest):
                # It starts then at the latest, evicting what is left (drainPreemptSeconds).
                latest = takes_back
                hold.basis = "drainPreemptSeconds: what still runs there is taken back then"
            if latest is not None:
                # The gang's start never moves later for backfill's sake: what was promised
                # it in an earlier cycle stands (room backfilled meanwhile ends by then).
                kept = self.memory.holding[hold.job.key]
                if kept.shadow is not None:
                    latest = min(latest, kept.shadow)
                kept.shadow = latest
            hold.shadow = latest
        return typing.cast("float | None", hold.shadow)

    def expected_start(self, job: jobs.Job) -> sessions.ExpectedStart | None:
        """When the job the guard holds room for is expected to start (its shadow time) and
        from which estimates, for its reason; ``None`` when nothing is held for it."""
        for hold in self.holds:
            if hold.job is job:
                return sessions.ExpectedStart(
                    at=self.shadow(hold), basis=hold.basis, idle=self._idle(hold)
                )
        return None

    def _idle(self, hold: holds.Hold) -> str:
        """The room free now that is held for the job, in words: the hold's cost, what
        nobody else may start on there meanwhile (but work expected to end in time)."""
        names = self.session.nodes.resources
        total = hold.amounts.sum(axis=0)
        return ", ".join(
            f"{trees.format_quantity(name, int(total[col]))} {name}"
            for col, name in enumerate(names)
            if total[col] > 0 and name != resources.PODS
        )

    def _ends(self, pod: pods.PodInfo, *, quantile: float) -> runtimes.Estimate:
        snapshot = self.session.snapshot
        return runtimes.estimate_end(
            pod,
            now=snapshot.now,
            queues=snapshot.queues,
            run_times=snapshot.run_times,
            quantile=quantile,
        )

    def hold_filter(self, pod: pods.PodInfo, nodes: nodetable.NodeTable) -> filtering.NodeFilter:
        """Keep ``pod`` off capacity held for a starving job other than its own."""
        own = self.session.job_of(pod)
        # A holder that placed or nominated its pods holds them through the table instead.
        active = [
            h
            for h in self.holds
            if h.job is not own and not h.job.committed and not h.job.pipelined
        ]
        if active:
            # EASY backfill: room held for a gang may go to a pod that ends before it starts.
            ends = self._ends(pod, quantile=holds.BACKFILL_QUANTILE).end
            if ends is not None:
                active = [h for h in active if not holds.ends_before_start(ends, self.shadow(h))]
        if not active:
            return filtering.passing(len(nodes))
        held = active[0].amounts if len(active) == 1 else np.sum([h.amounts for h in active], 0)
        rows = np.logical_or.reduce([h.rows for h in active])
        fits = ((nodes.free() - held) >= nodes.vector(pod.requests)).all(axis=1)
        return filtering.NodeFilter(
            passed=fits | ~rows,
            code=statuses.Code.UNSCHEDULABLE,
            reason=holds.held_for(active[0]),
        )
