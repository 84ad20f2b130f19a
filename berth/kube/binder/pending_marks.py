"""Why a pod waits, written on the pod: the binder's half of the pending signal.

The scheduler decides, a gang at a time, what each waiting pod's ``PodScheduled`` condition
says (:class:`~berth.scheduler.framework.pending.MarkPending`; docs/autoscaling.md): reason
``Unschedulable`` only where more nodes would place the pod and its whole gang — the one
signal Cluster Autoscaler and Karpenter act on — and otherwise the code of what it waits for.
:class:`PendingMarks` turns those decisions into writes:

- **What changed only.** A pod's condition is written when its reason (condition reason or
  message) differs from the one last written for it; every cycle repeats the decisions of
  everything still waiting, and an unchanged one costs no request. It is still told to the
  Event recorder, which counts it into the pod's one ``FailedScheduling`` Event (at most once
  per its repeat window) — told twice a window, not every cycle: the recorder would not count
  the others, and a cycle's repeats for hundreds of waiting pods were a measurable cost.
- **New words at most every** :data:`~berth.status.conditions.MESSAGE_REFRESH`. A message that
  changes while its condition reason stays (a starving gang's "waited 307s ... expected in 7s", a
  queue's "30/29" share) is written at most every ten seconds per pod — kube-scheduler's longest
  backoff between two attempts at an unschedulable pod, each of which rewrites its condition — and
  its newest words then (:meth:`PendingMarks.due`, asked every cycle, also for a gang parked since).
  Otherwise such a gang's pods were rewritten, with an Event each, every cycle they waited. A new
  condition reason is written at once: it is what autoscalers and users act on.
- **A gang still gathering is no news yet.** A pod whose first reason to wait is its gang's
  missing members (``NotEnoughPods``) is written only once that has lasted
  :data:`GATHERING` seconds (:meth:`PendingMarks.due`): a Job's or a JobSet's controller
  creates a gang's pods within a second or two, and each member seen before the last was
  otherwise given a condition and an Event moments before its binding, doubling the writes
  per pod of a stream of gangs. kube-scheduler's own gang scheduling writes nothing for such
  pods (they wait at PreEnqueue); the PodGroup's status says ``Pending`` at once.
- **A gang in one burst.** :meth:`PendingMarks.offer` turns one decision into one
  :class:`Burst` (the gang's pods whose condition changed); :meth:`PendingMarks.write` sends
  their patches together, so an autoscaler batching pending pods (Karpenter: one second idle,
  at most ten) sees the whole gang in one provisioning round, never a part of it.
- **Superseded writes are dropped, and a pod's writes take turns.** A burst waiting in the
  binder's queue while a newer decision changed a pod's reason again does not write the older
  one; a burst offered while an older one's patch of the same pod is in flight waits for it to
  land, so the older reason never lands last.
- **A failed write is sent again** (:data:`RETRY`) while it is still the pod's newest: a
  parked gang gets no next decision to write it, and an autoscaler reads only the pod.
- **Events say why.** After its condition is written, each pod gets a ``FailedScheduling``
  Event with the reason's message: the queue limit, the missing members, the nodes that do
  not fit.
- **Gangs the autoscaler cannot fit are held.** :meth:`PendingMarks.hold` is told which gangs
  wait as ``AutoscalerCannotFit`` (:class:`berth.status.scale_up.Holds`); their capacity
  decisions are written withheld (:func:`~berth.scheduler.framework.pending.withheld`). The
  last capacity decision of each gang is kept, so that a hold that begins or ends rewrites
  its pods at once, without waiting for a cycle to look at the gang again (a parked gang
  would wait for a node event).

The patch is a strategic merge of ``status.conditions`` (merge key ``type``) through the write
primitive (:class:`~berth.kube.transport.writes.Writer`, fenced), as kube-scheduler's status update
of the same condition.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import math

from berth.kube.transport import events, pod_edits, rest, writes
from berth.scheduler.framework import pending, reasons
from berth.status import conditions
from berth.util import clocks, keylocks, wakeups

__all__ = ["GATHERING", "Burst", "PendingMarks", "condition"]


def condition(waiting: pending.PodPending, *, now: float) -> dict[str, object]:
    """The ``PodScheduled`` condition of a pod waiting as ``waiting`` says, written at ``now``."""
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": waiting.condition,
        "message": waiting.reason.message,
        "lastProbeTime": None,
        "lastTransitionTime": conditions.timestamp(now),
    }


@dataclasses.dataclass(frozen=True)
class Burst:
    """The pods of one gang whose condition is to be written together, with their Events'
    objects."""

    group: str
    pods: tuple[pending.PodPending, ...]
    refs: tuple[events.ObjectRef, ...]


_Written = tuple[str, str]  # (condition reason, message) last written to a pod


@dataclasses.dataclass(frozen=True, slots=True)
class _Deferred:
    """Words for a pod's condition held back until ``due``: new words until
    ``MESSAGE_REFRESH`` has passed since the last write, a gathering gang's first until
    :data:`GATHERING` has."""

    group: str
    waiting: pending.PodPending
    ref: events.ObjectRef
    due: float


GATHERING = 5.0
"""Seconds a pod may wait for its gang's other members before its condition says so (the
module docstring): a Job controller creates hundreds of pods a second."""


RETRY = writes.Retry(attempts=4, first=1.0, cap=4.0)
"""A failed condition write is sent again after 1, 2 and 4 seconds (then the next decision
for the pod writes it): its gang may be parked, with no next decision soon."""


class PendingMarks:
    """Writes :class:`~berth.scheduler.framework.pending.MarkPending` decisions; see the
    module docstring. ``offer`` runs on the event loop and never blocks; ``write`` does the
    requests (the binder's write workers run it)."""

    def __init__(
        self,
        writer: writes.Writer,
        *,
        clock: clocks.Clock,
        recorder: events.EventRecorder | None = None,
    ) -> None:
        self._writer = writer
        self._clock = clock
        self._recorder = recorder
        self._written: dict[str, _Written] = {}  # pod key -> what its condition says (or will)
        self._written_at: dict[str, float] = {}  # pod key -> when that write was offered
        self._deferred: dict[str, _Deferred] = {}  # pod key -> its newer words, not yet due
        self._gathering: dict[str, float] = {}  # pod key -> when it was first told to gather
        self._writing = keylocks.KeyLocks()  # pods with a condition write in flight
        self._marks: dict[str, pending.MarkPending] = {}  # gang -> its last capacity decision
        self._gang_of: dict[str, str] = {}  # pod key -> its gang, for the kept decisions
        self._held: collections.abc.Mapping[str, reasons.Reason] = {}  # gang -> what it says
        self._told: dict[str, float] = {}  # pod key -> when its reason was last told to Events
        # Twice per window: a repeat is counted at most half a window late, and the recorder,
        # which forgets an object idle for a window, never forgets a waiting pod.
        self._tell_every = recorder.repeat_seconds / 2 if recorder is not None else math.inf
        self.bursts = 0
        """Bursts written (tests, the bench)."""

    def offer(
        self,
        decision: pending.MarkPending,
        *,
        ref: collections.abc.Callable[[str], events.ObjectRef],
    ) -> Burst | None:
        """The burst ``decision`` asks for (None: nothing changed); unchanged pods' reasons are
        told to the recorder at once. ``ref`` gives a pod's Event object by key."""
        self._keep(decision)
        held = self._held.get(decision.group)
        if held is not None:
            decision = pending.withheld(decision, held)
        changed: list[pending.PodPending] = []
        refs: list[events.ObjectRef] = []
        now = self._clock.now()
        for waiting in decision.pods:
            key = waiting.key
            says = (waiting.condition, waiting.reason.message)
            written = self._written.get(key)
            if written == says:
                # Still waiting for the same reason: the condition stands; the recorder counts
                # the repeat into the pod's one FailedScheduling Event (at most once a while).
                self._deferred.pop(key, None)
                if now >= self._told.get(key, -math.inf) + self._tell_every:
                    self._event(ref(key), waiting)
                continue
            due = self._held_until(key, waiting, written, now=now)
            if now < due:
                self._deferred[key] = _Deferred(decision.group, waiting, ref(key), due)
                continue
            self._deferred.pop(key, None)
            self._written[key], self._written_at[key] = says, now
            changed.append(waiting)
            refs.append(ref(key))
        if not changed:
            return None
        return Burst(group=decision.group, pods=tuple(changed), refs=tuple(refs))

    def _held_until(
        self, key: str, waiting: pending.PodPending, written: _Written | None, *, now: float
    ) -> float:
        """Until when ``waiting``'s words for the pod ``key`` are held back (the past: not)."""
        if written is None:
            if waiting.reason.code is not reasons.ReasonCode.NOT_ENOUGH_PODS:
                return -math.inf
            return self._gathering.setdefault(key, now) + GATHERING
        if written[0] != waiting.condition:
            return -math.inf  # a new condition reason is news at once
        return self._written_at.get(key, -math.inf) + conditions.MESSAGE_REFRESH

    def due(self) -> list[Burst]:
        """The bursts of held-back words now due (a gang per burst): the newest words each
        pod was given, now written."""
        now = self._clock.now()
        ready = [held for held in self._deferred.values() if now >= held.due]
        by_group: dict[str, list[_Deferred]] = {}
        for held in ready:
            key = held.waiting.key
            del self._deferred[key]
            self._written[key] = (held.waiting.condition, held.waiting.reason.message)
            self._written_at[key] = now
            by_group.setdefault(held.group, []).append(held)
        return [
            Burst(
                group=group,
                pods=tuple(held.waiting for held in pods),
                refs=tuple(held.ref for held in pods),
            )
            for group, pods in sorted(by_group.items())
        ]

    async def write(self, burst: Burst) -> None:
        """Write the burst's conditions together, then tell each pod's Event.

        A pod's writes take turns: an older burst still in flight when a newer one is offered
        would otherwise land after it and leave the older reason on the pod. A write the API
        server failed (refused, timed out: not fenced) is tried again after a backoff while
        it is still the pod's newest, a bounded number of times: a parked gang has no next
        decision to write it, and an autoscaler reads only what is on the pod."""
        delays = RETRY.delays()
        retry: Burst | None = burst
        while retry is not None:
            async with self._writing.hold(*(waiting.key for waiting in retry.pods)):
                retry = await self._write(retry)
            if retry is None:
                return
            delay = next(delays, None)
            if delay is None:
                for waiting in retry.pods:  # given up: the next decision writes it again
                    if self._current(waiting):
                        del self._written[waiting.key]
                return
            await wakeups.sleep_or_stop(delay)

    def _current(self, waiting: pending.PodPending) -> bool:
        """``waiting`` is still what the pod's condition is to say (no newer decision)."""
        return self._written.get(waiting.key) == (waiting.condition, waiting.reason.message)

    async def _write(self, burst: Burst) -> Burst | None:
        """One attempt; the pods whose write failed and is still their newest (to retry)."""
        current = [
            (waiting, ref)
            for waiting, ref in zip(burst.pods, burst.refs, strict=True)
            if self._current(waiting)
        ]
        if not current:
            return None  # every pod of it got a newer reason meanwhile (or went)
        self.bursts += 1
        now = self._clock.now()
        landed = await asyncio.gather(
            *(
                self._writer.patch(
                    pod_edits.path(waiting.key) + "/status",
                    {"status": {"conditions": [condition(waiting, now=now)]}},
                    content_type=rest.STRATEGIC_MERGE_PATCH,
                    what=f"pod {waiting.key} condition",
                )
                for waiting, _ in current
            )
        )
        failed: list[tuple[pending.PodPending, events.ObjectRef]] = []
        for (waiting, ref), written in zip(current, landed, strict=True):
            if written.outcome is writes.Outcome.GONE:
                self.forget(waiting.key)
            elif written.outcome is writes.Outcome.FENCED:
                # Not ours to write any more: the next leader's decision writes it.
                if self._current(waiting):
                    del self._written[waiting.key]
            elif not written.ok:
                failed.append((waiting, ref))
            else:
                self._event(ref, waiting)
        if not failed:
            return None
        return Burst(
            group=burst.group,
            pods=tuple(waiting for waiting, _ in failed),
            refs=tuple(ref for _, ref in failed),
        )

    def written(self, key: str) -> tuple[str, str] | None:
        """``(reason, message)`` of the condition last written (or being written) to the pod."""
        return self._written.get(key)

    def forget(self, key: str) -> None:
        """The pod was placed or left: a later reason to wait is news again (and its gang's
        kept decision goes: the next cycle's says what the rest wait for)."""
        self._written.pop(key, None)
        self._written_at.pop(key, None)
        self._deferred.pop(key, None)
        self._gathering.pop(key, None)
        self._told.pop(key, None)
        gang = self._gang_of.pop(key, None)
        if gang is not None:
            self._drop(gang)

    def hold(
        self,
        held: collections.abc.Mapping[str, reasons.Reason],
        *,
        ref: collections.abc.Callable[[str], events.ObjectRef],
    ) -> list[Burst]:
        """Hold the gangs of ``held`` (gang key -> what its pods say instead of
        ``Unschedulable``), release the others; the bursts rewriting the pods of each gang
        whose hold began, changed or ended (from its kept decision)."""
        before, self._held = self._held, dict(held)
        bursts: list[Burst] = []
        for gang in sorted(set(before) | set(self._held)):
            mark = self._marks.get(gang)
            if mark is None or before.get(gang) == self._held.get(gang):
                continue
            burst = self.offer(mark, ref=ref)
            if burst is not None:
                bursts.append(burst)
        return bursts

    def _keep(self, decision: pending.MarkPending) -> None:
        self._drop(decision.group)
        if not decision.capacity:
            return  # it waits for something else: no hold applies
        self._marks[decision.group] = decision
        for waiting in decision.pods:
            self._gang_of[waiting.key] = decision.group

    def _drop(self, gang: str) -> None:
        mark = self._marks.pop(gang, None)
        if mark is not None:
            for waiting in mark.pods:
                if self._gang_of.get(waiting.key) == gang:
                    del self._gang_of[waiting.key]

    def _event(self, ref: events.ObjectRef, waiting: pending.PodPending) -> None:
        self._told[waiting.key] = self._clock.now()
        if self._recorder is not None:
            self._recorder.record(
                ref,
                type=events.WARNING,
                reason="FailedScheduling",
                message=waiting.reason.message,
            )
