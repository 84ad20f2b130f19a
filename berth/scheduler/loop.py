"""The scheduling loop: snapshot -> open session -> actions -> close session -> decisions.

:class:`Scheduler` is the pure, synchronous part: built once from a profile and a plugin
registry (plugins are built then, so their controllers and routes are known before the first
cycle), it turns a snapshot into a :class:`~berth.scheduler.framework.decisions.CycleResult`
(:meth:`Scheduler.run_session`), or runs one cycle between a :class:`SnapshotSource` and a
:class:`DecisionSink` (:meth:`Scheduler.run_once`).

:func:`run` is the asynchronous driver the operator runs while it leads — the only non-pure
code in ``berth.scheduler``: it runs a cycle, then sleeps until ``trigger`` is set (something
changed) or ``period`` passes, until ``stop`` is set. The session itself runs in a worker
thread so the event loop (lease renewal, watches, HTTP) keeps going; the snapshot is taken and
the result applied on the event loop, so source and sink need no locking.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging
import time
import typing

from berth.scheduler.actions import registry as actions_registry
from berth.scheduler.actions import solvers
from berth.scheduler.framework import (
    decisions,
    handles,
    interfaces,
    parking,
    profiles,
    reasons,
    registries,
    runtime,
    sessions,
)
from berth.util import clocks, wakeups

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import snapshots

__all__ = ["DecisionSink", "Scheduler", "SnapshotSource", "run"]

logger = logging.getLogger(__name__)


class SnapshotSource(typing.Protocol):
    """Where cycles get the cluster from (``berth.kube`` informers, ``berth.sim``)."""

    def snapshot(self) -> snapshots.Snapshot:
        """The cluster now, as a snapshot the session may own."""
        ...


class DecisionSink(typing.Protocol):
    """Where cycles send their decisions (the API server, ``berth.sim``)."""

    def apply(self, result: decisions.CycleResult) -> None:
        """Apply ``result``'s decisions in order (bind, evict, annotate, conditions...)."""
        ...


class Scheduler:
    """A profile's plugins and actions, ready to run sessions; see the module docstring."""

    def __init__(
        self,
        profile: profiles.Profile,
        *,
        registry: registries.Registry,
        clock: clocks.Clock,
        actions: collections.abc.Sequence[interfaces.Action] | None = None,
        handle: handles.ExtendedHandle | None = None,
        hints: bool = False,
        revisit_seconds: float = parking.DEFAULT_REVISIT_SECONDS,
        placement_limit: int | None = None,
    ) -> None:
        """``hints``: park work that cannot fit until an event that could change that
        (:mod:`~berth.scheduler.framework.parking`); ``revisit_seconds`` bounds how long.
        Off by default here, so that a caller driving sessions by hand sees every job tried
        every session; the operator (setting ``queueing_hints``), the simulator and ``berth
        bench backlog`` turn hints on. ``placement_limit``: the most pods a session places
        before it is cut short (:mod:`~berth.scheduler.actions.allocate`); ``None``, the
        default, places all it can in one session (the simulator, where sessions take no
        time); the operator sets it, so that bindings go out while a burst is placed."""
        available = tuple(actions) if actions is not None else actions_registry.default_actions()
        by_name = {action.name: action for action in available}
        resolved = profiles.resolve(profile, registry=registry, actions=by_name)
        self.clock = clock
        self.profile = resolved
        self.handle = handle if handle is not None else handles.ExtendedHandle(clock=clock)
        self.framework = runtime.Framework(resolved, handle=self.handle)
        self.actions: tuple[interfaces.Action, ...] = tuple(by_name[n] for n in resolved.actions)
        """The actions every session runs, in order."""
        self.parking: parking.Parking | None = (
            parking.Parking(revisit_seconds=revisit_seconds) if hints else None
        )
        """Jobs parked between sessions (``None``: every session tries every job)."""
        if placement_limit is not None and placement_limit < 1:
            raise ValueError(f"placement_limit must be at least 1, got {placement_limit}")
        self.placement_limit = placement_limit
        self._last: decisions.CycleResult | None = None

    @property
    def debug_top_n(self) -> int:
        """Top-N score tables per pod (0: off); settable at run time."""
        return self.framework.debug_top_n

    @debug_top_n.setter
    def debug_top_n(self, value: int) -> None:
        self.framework.debug_top_n = max(0, int(value))

    @property
    def controllers(self) -> handles.ControllerRegistry:
        """The plugins' controllers, for the operator to run while it leads."""
        return self.handle.controllers

    @property
    def services(self) -> handles.ServiceRegistry:
        """The plugins' HTTP routes, for the operator to mount."""
        return self.handle.services

    def run_session(self, snapshot: snapshots.Snapshot) -> decisions.CycleResult:
        """One session over ``snapshot``: open, every action, close. Pure but for parking:
        with hints, what the last sessions parked is left out, and a session that could only
        repeat the last one's reasons is skipped (its result repeats them, with no
        decisions)."""
        lot = self.parking
        if lot is not None and self._last is not None and lot.quiet(snapshot):
            lot.saw(snapshot)
            self.framework.passed_over(snapshot)
            return _repeat(self._last, session_id=f"{self._last.session_id}-again")
        parked = (
            lot.admit(
                snapshot, rows=lambda pod: self.framework.static_rows(pod, nodes=snapshot.nodes)
            )
            if lot is not None
            else None
        )
        session = sessions.open_session(
            snapshot,
            framework=self.framework,
            parked=parked,
            waiting=lot.waiting(snapshot) if lot is not None else None,
            placement_limit=self.placement_limit,
        )
        bound = _TimeBound()
        try:
            for action in self.actions:
                started = time.perf_counter()
                try:
                    action.execute(session)
                except Exception:
                    # A bug in an action must not stop the cycle or the decisions made so far.
                    logger.exception("action %s failed in session %s", action.name, session.id)
                session.action_seconds[action.name] = time.perf_counter() - started
                if session.cut_short:
                    # The rest of the line is untried: the next session, at once, finishes
                    # it before anything is evicted for it.
                    break
            if lot is not None:
                bound = _time_bound(session)
        finally:
            result = sessions.close_session(session)
        if result.cut_short and self._last is not None:
            result = _keep_untried(result, session=session, last=self._last)
        if lot is not None:
            # A session with errors is never repeated silently: its errors are news each time.
            # Reasons to wait (per pod, and per gang for autoscalers) are no action.
            quiet = not result.errors and all(
                isinstance(d, decisions.Unschedulable | decisions.MarkPending)
                for d in result.decisions
            )
            lot.record(
                session,
                contending=bound.contending,
                starving=bound.starving,
                revisit=bound.revisit,
                class_revisit=bound.class_revisit,
                quiet=quiet,
                due=result.revisit_at,
            )
            # When a job left waiting looks again by time alone (its starvation threshold, a
            # drain's deadline, a victim passing its minimum runtime): the caller wakes then
            # too, even if nothing else happens by then.
            due = min(
                (
                    t
                    for t in (*bound.revisit.values(), *bound.class_revisit.values())
                    if t > snapshot.now
                ),
                default=None,
            )
            if due is not None and (result.revisit_at is None or due < result.revisit_at):
                result = dataclasses.replace(result, revisit_at=due)
        self._last = result
        return result

    def run_once(self, source: SnapshotSource, sink: DecisionSink) -> decisions.CycleResult:
        """One cycle: take a snapshot from ``source``, run a session, apply to ``sink``."""
        result = self.run_session(source.snapshot())
        sink.apply(result)
        return result


@dataclasses.dataclass(slots=True)
class _TimeBound:
    """What the lot is told of the jobs a session left pending (:func:`_time_bound`)."""

    contending: dict[str, str] = dataclasses.field(default_factory=dict)
    """Starving jobs room is held for or would be next (``job_contending``), by key: their
    queue. Never parked."""
    starving: set[str] = dataclasses.field(default_factory=set)
    """Other starving jobs (the guard holds for a few at a time): parked in line."""
    revisit: dict[str, float] = dataclasses.field(default_factory=dict)
    class_revisit: dict[str, float] = dataclasses.field(default_factory=dict)


def _time_bound(session: sessions.Session) -> _TimeBound:
    """Of the jobs left pending, the starving ones room is held for or would be next, the
    other starving ones, and when the others' situation changes by time alone: their own
    (plugins' ``revisit_at``, and the end of a preemption window a job waits in) and their
    class's (``class_revisit_at``)."""
    hooks = session.hooks
    bound = _TimeBound()
    for key, job in session.jobs.items():
        if key not in session.group_why:
            continue
        if hooks.job_contending(job):
            # Room was held for it this session, or would be next: whatever this session's
            # placements did to its queue's room (which may stop it starving until some of
            # that work ends), the guard weighs it again next session, as trying every job
            # every cycle would. Its times below (its drain's end) still wake the loop.
            bound.contending[key] = job.queue
        elif len(hooks.job_starving) and hooks.job_starving(job):
            # Asked after the actions: a job whose queue's room its own held pods took is no
            # longer starving, and its times below (its drain's end) must still wake the loop.
            bound.starving.add(key)
        times = [t] if (t := hooks.revisit_at(job)) is not None else []
        if session.group_why[key].code is reasons.ReasonCode.PREEMPTION_DELAYED:
            # It may evict once its preemption window closes: it looks again then.
            queue = session.snapshot.queues.get(job.queue)
            ends = solvers.window_end(session, job, queue) if queue is not None else None
            if ends is not None:
                times.append(ends)
        if times:
            bound.revisit[key] = min(times)
        if (t := hooks.class_revisit_at(job)) is not None:
            bound.class_revisit[key] = t
    return bound


def _keep_untried(
    result: decisions.CycleResult, *, session: sessions.Session, last: decisions.CycleResult
) -> decisions.CycleResult:
    """``result`` of a session cut short, with the work it did not try keeping the reasons
    and places in line ``last`` gave it, as parked work does: their statuses stand until the
    next session, at once, tries them (rather than losing their reasons for a moment)."""
    groups: dict[str, reasons.Reason] = {
        key: why
        for key, job in session.jobs.items()
        if key not in session.group_why
        and (why := last.group_why.get(key)) is not None
        and not any(pod.key in session.placed for pod in job.pending)
    }
    pods: dict[str, reasons.Reason] = {
        key: why
        for key, own in session.pod_why.items()
        if own.code is reasons.ReasonCode.NOT_TRIED and (why := last.pod_why.get(key)) is not None
    }
    if not groups and not pods:
        return result
    own_pods, own_groups, own_lines, last_lines = (
        result.pod_why,
        result.group_why,
        result.waiting,
        last.waiting,
    )

    def merged_reasons(
        own: collections.abc.Mapping[str, reasons.Reason], kept: dict[str, reasons.Reason]
    ) -> parking.Lazy[reasons.Reason]:
        return parking.Lazy(lambda: dict(sorted({**own, **kept}.items())))

    def lines() -> dict[str, tuple[str, ...]]:
        merged = dict(own_lines)
        for queue, line in last_lines.items():
            kept = tuple(key for key in line if key in groups)
            if kept:
                merged[queue] = (*merged.get(queue, ()), *kept)
        return dict(sorted(merged.items()))

    return dataclasses.replace(
        result,
        pod_why=merged_reasons(own_pods, pods),
        group_why=merged_reasons(own_groups, groups),
        waiting=parking.Lazy(lines),
    )


def _repeat(last: decisions.CycleResult, *, session_id: str) -> decisions.CycleResult:
    """A skipped session's result: the last one's reasons and lines, no decisions."""
    return decisions.CycleResult(
        session_id=session_id,
        pod_why=last.pod_why,
        group_why=last.group_why,
        waiting=last.waiting,
        queues=last.queues,
    )


async def run(
    scheduler: Scheduler,
    *,
    source: SnapshotSource,
    sink: DecisionSink,
    stop: asyncio.Event,
    trigger: asyncio.Event | None = None,
    period: float = 1.0,
    in_thread: bool = True,
    on_result: collections.abc.Callable[[decisions.CycleResult], None] | None = None,
) -> None:
    """Run cycles until ``stop`` is set: after each, wait for ``trigger`` or ``period`` seconds.

    ``in_thread=False`` runs sessions on the event loop (tests under virtual time).
    ``on_result`` sees every result after the sink applied it (metrics). A cycle that fails
    is logged and the loop goes on at the next wake-up. After a session cut short at its
    placement limit, the next runs at once.
    """
    wake = trigger if trigger is not None else asyncio.Event()
    while not stop.is_set():
        wake.clear()
        result: decisions.CycleResult | None = None
        try:
            snapshot = source.snapshot()
            if in_thread:
                result = await asyncio.to_thread(scheduler.run_session, snapshot)
            else:
                result = scheduler.run_session(snapshot)
            sink.apply(result)
            if on_result is not None:
                on_result(result)
        except Exception:
            logger.exception("scheduling cycle failed; retrying at the next wake-up")
        if stop.is_set():
            break
        if result is not None and result.cut_short:
            # At once: the bindings just handed over go out while the next session runs.
            await wakeups.sleep_or_stop(0)
            continue
        await wakeups.first_set(wake, stop, timeout=period)
