"""The Proportion plugin: at session open it builds the session's books
(:class:`~.accounting.Accounting`), then each rule family over them, and registers every hook
from the family that answers it; at close it publishes the queue statuses and drops them all
(R8). What a family keeps across cycles (the starvation guard's :class:`~.holds.Memory`; the
minimum runtimes' heap; the usage history) is the plugin's, handed to the family that owns it
when it is built."""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import numpy as np

from berth.api import resources
from berth.scheduler.framework import handles, interfaces, pending, reasons, sessions
from berth.scheduler.plugins.proportion import (
    accounting,
    admission,
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

__all__ = ["Proportion", "Rules", "new"]

NAME = accounting.NAME


@dataclasses.dataclass(frozen=True)
class Rules:
    """One session's books and the rule families built over them (open to close)."""

    books: accounting.Accounting
    admission: admission.Admission
    queue_order: ordering.QueueOrder
    job_order: ordering.JobOrder
    reclaim: reclaim.ReclaimRules
    guard: starvation.StarvationGuard

    @classmethod
    def build(
        cls,
        session: sessions.Session,
        *,
        args: arguments.ProportionArgs,
        usage: collections.abc.Mapping[str, float] | None,
        memory: holds.Memory,
        min_runtime_ends: min_runtime.MinRuntime,
        handle: handles.ExtendedHandle,
    ) -> Rules:
        """The books, then each family with what it reads (and keeps across cycles) and the
        framework's services it asks (``handle``)."""
        books = accounting.Accounting(session, usage=usage)
        admitting = admission.Admission(books)
        guard = starvation.StarvationGuard(
            books, admission=admitting, args=args, memory=memory, handle=handle
        )
        return cls(
            books=books,
            admission=admitting,
            queue_order=ordering.QueueOrder(books),
            job_order=ordering.JobOrder(books),
            reclaim=reclaim.ReclaimRules(
                books,
                admission=admitting,
                args=args,
                min_runtime_ends=min_runtime_ends,
                drained=guard.drained,
            ),
            guard=guard,
        )


class Proportion(interfaces.SessionPlugin):
    """Session plugin (queue order, validity, allocatable, reclaim filters, starvation guard,
    queue statuses)."""

    name = NAME

    def __init__(self, args: arguments.ProportionArgs, *, handle: handles.ExtendedHandle) -> None:
        self._args = args
        self._handle = handle
        self._rules: Rules | None = None
        self._holds = holds.Memory()  # the starvation guard's, from cycle to cycle
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
        rules = self._rules = Rules.build(
            session,
            args=self._args,
            usage=usage,
            memory=self._holds,
            min_runtime_ends=self._min_runtime_ends,
            handle=self._handle,
        )
        books, admitting, reclaiming, guard = (
            rules.books,
            rules.admission,
            rules.reclaim,
            rules.guard,
        )
        if self._args.reclaim_to_fair_share and self._min_runtime_ends.started:
            # Every snapshot once asked, so that the next one adds only what changed since.
            self._min_runtime_ends.observe(session.snapshot, min_runtime=reclaiming.min_runtime)
        registry = session.hooks
        registry.queue_order.add_key(rules.queue_order.queue_key, plugin=NAME)
        if rules.job_order.ordered_queues():
            registry.job_order.add_key(rules.job_order.job_order_key, plugin=NAME, leading=True)
        registry.queue_overused.add(rules.queue_order.overused, plugin=NAME)
        registry.job_valid.add(admitting.job_valid, plugin=NAME)
        registry.allocatable.add(admitting.allocatable, plugin=NAME)
        registry.can_reclaim.add(reclaiming.can_reclaim, plugin=NAME)
        registry.reclaimable.add(reclaiming.reclaimable, plugin=NAME)
        registry.reclaim_reason.add(reclaiming.eviction_reason, plugin=NAME)
        registry.preemptable.add(reclaiming.preemptable, plugin=NAME)
        registry.preempts_across_queues.add(reclaiming.preempts_across_queues, plugin=NAME)
        registry.job_starving.add(guard.starving, plugin=NAME)
        registry.job_contending.add(guard.contending, plugin=NAME)
        registry.revisit_at.add(guard.revisit_at, plugin=NAME)
        registry.class_revisit_at.add(reclaiming.class_revisit_at, plugin=NAME)
        registry.nominations.add(guard.nominations, plugin=NAME)
        registry.expected_start.add(guard.expected_start, plugin=NAME)
        registry.allocated.add(books.on_allocate, plugin=NAME)
        registry.deallocated.add(books.on_deallocate, plugin=NAME)
        registry.cycle_revisit_at.add(guard.next_drain, plugin=NAME)
        if guard.threshold is not None or any(
            info.start_at is not None for info in session.snapshot.reservations.values()
        ):
            guard.take_holds()
            if guard.holds:
                registry.predicates.add(guard.hold_filter, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        rules, self._rules = self._rules, None
        if rules is not None and rules.books.session is session:
            _limits_over_capacity(session, rules.admission)
            _drains_given_back(session, self._holds.given_back)
            published = publishing.publish(rules.books)
            for queue, idle in rules.guard.held_idle().items():
                if queue in published:
                    published[queue] = dataclasses.replace(published[queue], held=idle)
            session.queue_statuses.update(published)
            # A shadow lasts while its job is held for; a job held again later starts afresh.
            self._holds.forget_shadows(except_for={hold.job.key for hold in rules.guard.holds})
            if self._history is not None:
                self._history.hold(rules.books.holdings())


def _limits_over_capacity(session: sessions.Session, admitting: admission.Admission) -> None:
    """A gang still waiting for nodes whose quorum its queue's limits would refuse anyway
    waits for the limit: so it says, and autoscalers are not asked for nodes it cannot use
    (:meth:`~.admission.Admission.limit_keeps_out`)."""
    for key, why in list(session.group_why.items()):
        job = session.jobs.get(typing.cast("ids.PodGroupKey", key))
        if job is None or not pending.needs_capacity(why.code):
            continue
        if job.occupied() >= job.group.min_member:
            continue  # at quorum: each further pod was held against the limit on its own
        limited = admitting.limit_keeps_out(job)
        if limited is not None:
            session.reject_job(job, reason=limited)


def _drains_given_back(session: sessions.Session, given_back: dict[str, holds.GivenBack]) -> None:
    """A job held for past ``drainTimeoutSeconds`` says so while it waits: the room went back
    to everyone, and when it may be held for again."""
    now = session.snapshot.now
    for key, gave in list(given_back.items()):
        again = gave.at + gave.held_for
        if now >= again:
            del given_back[key]  # it may be held for again: the guard says so itself
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
    return Proportion(args, handle=handle)
