"""The Proportion plugin: builds a session's books at open, registers the rules as hooks,
publishes the queue statuses at close and drops the books (R8)."""

from __future__ import annotations

import collections.abc
import dataclasses
import math
import typing

import numpy as np

from berth.api import resources
from berth.scheduler.framework import handles, interfaces, jobs, pending, reasons, sessions
from berth.scheduler.plugins.proportion import (
    accounting,
    decay,
    holds,
    min_runtime,
    ordering,
    publishing,
    reclaim,
    starvation,
)
from berth.scheduler.plugins.proportion import args as arguments

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import ids

__all__ = ["Books", "Proportion", "new"]

NAME = accounting.NAME


class Books(
    reclaim.ReclaimRules,
    starvation.StarvationGuard,
    ordering.JobOrder,
):
    """One session's books with every rule family (the modules of this package)."""

    def __init__(
        self,
        session: sessions.Session,
        *,
        args: arguments.ProportionArgs,
        usage: collections.abc.Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(session, args=args, usage=usage)
        self._modes = {}
        self._min_runtimes = {}
        self._sides = {}
        self._verdicts = {}
        self._guarantors = {}
        self._fair = None
        self.holds = []
        self.shadows = {}
        self.held_since = {}
        self.given_back = {}
        self.held_nodes = {}
        self.min_runtime_ends = min_runtime.MinRuntime()  # the plugin hands its own
        self._hopeless_jobs = {}
        self._free_at_open = None
        self._smallest_pods = {}
        self._next_min_runtime_end = None

    def revisit_at(self, job: jobs.Job) -> float | None:
        """When time alone changes what this plugin says of ``job`` itself: it passes the
        starvation threshold (counted from its creation). A parked job wakes then, so that
        the guard sees it."""
        now = self.session.snapshot.now
        times = [math.inf]
        if self.threshold is not None and job.creation_timestamp + self.threshold > now:
            times.append(job.creation_timestamp + self.threshold)
        drain = self.drain_begins(job)
        if drain is not None:
            times.append(drain)
        if self.args.usage_half_life_seconds:
            # Decayed shares drift with time alone, and which waiting jobs the guard holds
            # room for follows them: every such job is looked at every cycle.
            times.append(now)
        found = min(times)
        return found if found < math.inf else None

    def class_revisit_at(self, job: jobs.Job) -> float | None:
        """When time alone changes what this plugin says of every job shaped like ``job``: a
        running pod passes its minimum runtime and may be reclaimed. The head of a parked
        class wakes then, so that reclaim sees it (if it reclaims, what it frees wakes the
        rest). Only a job that may reclaim toward its fair share waits for that: the minimum
        runtime binds nothing else, and whether a job may reclaim at all does not change by
        time alone."""
        if self.reclaim_mode(job) is not reclaim.ReclaimMode.FAIR_SHARE:
            return None
        found = self.next_min_runtime_end()
        return found if found < math.inf else None


class Proportion(interfaces.SessionPlugin):
    """Session plugin (queue order, validity, allocatable, reclaim filters, starvation guard,
    queue statuses)."""

    name = NAME

    def __init__(self, args: arguments.ProportionArgs) -> None:
        self._args = args
        self._books: Books | None = None
        self._shadows: dict[str, float] = {}  # starving job -> its earliest shadow time
        self._held_since: dict[str, float] = {}  # starving job -> when its hold began
        self._given_back: dict[str, holds.GivenBack] = {}  # holds past their timeout
        self._held_nodes: dict[str, int] = {}  # starving job -> how many nodes it held last
        self._min_runtime_ends = min_runtime.MinRuntime()  # when running pods pass theirs
        # The one thing kept from cycle to cycle: the decayed usage (usageHalfLifeSeconds).
        half_life = args.usage_half_life_seconds
        self._history = decay.UsageHistory(half_life=float(half_life)) if half_life else None

    def on_session_open(self, session: sessions.Session) -> None:
        usage = None
        if self._history is not None:
            if self._history.as_of is None:  # this replica's first cycle: rebuild from what runs
                self._history.seed(_running_usage(session, self._history), now=session.snapshot.now)
            usage = self._history.advance(session.snapshot.now)
        books = self._books = Books(session, args=self._args, usage=usage)
        books.shadows = self._shadows
        books.held_since = self._held_since
        books.given_back = self._given_back
        books.held_nodes = self._held_nodes
        books.min_runtime_ends = self._min_runtime_ends
        if self._args.reclaim_to_fair_share and self._min_runtime_ends.started:
            # Every snapshot once asked, so that the next one adds only what changed since.
            self._min_runtime_ends.observe(session.snapshot, min_runtime=books.min_runtime)
        registry = session.hooks
        queue_order = ordering.QueueOrder(books)
        registry.queue_order.add_key(queue_order.queue_key, plugin=NAME)
        if books.ordered_queues():
            registry.job_order.add_key(books.job_order_key, plugin=NAME, leading=True)
        registry.queue_overused.add(queue_order.overused, plugin=NAME)
        session.add_job_valid_fn(books.job_valid, plugin=NAME)
        registry.allocatable.add(books.allocatable, plugin=NAME)
        registry.can_reclaim.add(books.can_reclaim, plugin=NAME)
        registry.reclaimable.add(books.reclaimable, plugin=NAME)
        registry.reclaim_reason.add(books.eviction_reason, plugin=NAME)
        registry.preemptable.add(books.preemptable, plugin=NAME)
        registry.preempts_across_queues.add(books.preempts_across_queues, plugin=NAME)
        registry.job_starving.add(books.starving, plugin=NAME)
        registry.revisit_at.append(books.revisit_at)
        registry.class_revisit_at.append(books.class_revisit_at)
        registry.nominations.add(books.nominations, plugin=NAME)
        registry.expected_start.add(books.expected_start, plugin=NAME)
        session.add_event_handler(
            plugin=NAME, allocate=books.on_allocate, deallocate=books.on_deallocate
        )
        session.revisit_fns.append(books.next_drain)
        if books.threshold is not None or any(
            info.start_at is not None for info in session.snapshot.reservations.values()
        ):
            books.take_holds()
            if books.holds:
                session.add_predicate_fn(books.hold_filter, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        books, self._books = self._books, None
        if books is not None and books.session is session:
            _limits_over_capacity(session, books)
            _drains_given_back(session, books)
            published = publishing.publish(books)
            for queue, idle in books.held_idle().items():
                if queue in published:
                    published[queue] = dataclasses.replace(published[queue], held=idle)
            session.queue_statuses.update(published)
            # A shadow lasts while its job is held for; a job held again later starts afresh.
            held = {hold.job.key for hold in books.holds}
            for key in [k for k in self._shadows if k not in held]:
                del self._shadows[key]
            if self._history is not None:
                self._history.hold(books.holdings())


def _limits_over_capacity(session: sessions.Session, books: Books) -> None:
    """A gang still waiting for nodes whose quorum its queue's limits would refuse anyway
    waits for the limit: so it says, and autoscalers are not asked for nodes it cannot use
    (:meth:`~.admission.Admission.limit_keeps_out`)."""
    for key, why in list(session.group_why.items()):
        job = session.jobs.get(typing.cast("ids.PodGroupKey", key))
        if job is None or not pending.needs_capacity(why.code):
            continue
        if job.occupied() >= job.group.min_member:
            continue  # at quorum: each further pod was held against the limit on its own
        limited = books.limit_keeps_out(job)
        if limited is not None:
            session.reject_job(job, reason=limited)


def _drains_given_back(session: sessions.Session, books: Books) -> None:
    """A job held for past ``drainTimeoutSeconds`` says so while it waits: the room went back
    to everyone, and when it may be held for again."""
    now = session.snapshot.now
    for key, gave in list(books.given_back.items()):
        again = gave.at + gave.held_for
        if now >= again:
            del books.given_back[key]  # it may be held for again: the guard says so itself
            continue
        job = session.jobs.get(typing.cast("ids.PodGroupKey", key))
        if job is None or job.occupied() >= job.group.min_member:
            continue
        where = "node" if gave.nodes == 1 else "nodes"
        told = reasons.new(
            reasons.ReasonCode.UNSCHEDULABLE,
            f"gave back the room held for it on {gave.nodes} {where} after "
            f"{int(gave.held_for)}s (drainTimeoutSeconds); may be held for again in "
            f"{int(again - now)}s",
            plugin=NAME,
            drainGivenBackSeconds=int(now - gave.at),
        )
        why = session.group_why.get(job.key)
        session.reject_job(job, reason=told.followed_by(why) if why else told)


def _running_usage(session: sessions.Session, history: decay.UsageHistory) -> dict[str, float]:
    """The usage history rebuilt from the snapshot's placed pods (:func:`decay.rebuilt`)."""
    snapshot = session.snapshot
    infos = snapshot.queues
    table = session.nodes

    def path(name: str) -> list[str]:
        out: list[str] = []
        current: str | None = name
        while current is not None and current in infos and current not in out:
            out.append(current)
            current = infos[current].parent
        return out

    capacity = table.allocatable.sum(axis=0).astype(np.float64)
    capacity[[r == resources.PODS for r in table.resources]] = 0.0
    running = (
        (
            path(pod.queue),
            pod.start_time if pod.start_time is not None else pod.creation_timestamp,
            session.vector(pod),
        )
        for pod in snapshot.pods.values()
        if pod.queue is not None and pod.node_name is not None and not pod.terminal
    )
    return decay.rebuilt(running, capacity=capacity, now=snapshot.now, half_life=history.half_life)


def new(args: arguments.ProportionArgs, handle: handles.ExtendedHandle) -> Proportion:
    """Build the plugin."""
    return Proportion(args)
