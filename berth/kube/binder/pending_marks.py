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
  per its repeat window).
- **A gang in one burst.** :meth:`PendingMarks.offer` turns one decision into one
  :class:`Burst` (the gang's pods whose condition changed); :meth:`PendingMarks.write` sends
  their patches together, so an autoscaler batching pending pods (Karpenter: one second idle,
  at most ten) sees the whole gang in one provisioning round, never a part of it.
- **Superseded writes are dropped.** A burst waiting in the binder's queue while a newer
  decision changed a pod's reason again does not write the older one.
- **Events say why.** After its condition is written, each pod gets a ``FailedScheduling``
  Event with the reason's message: the queue limit, the missing members, the nodes that do
  not fit.

The patch is a strategic merge of ``status.conditions`` (merge key ``type``) through the write
primitive (:class:`~berth.kube.transport.writes.Writer`, fenced), as kube-scheduler's status update
of the same condition.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses

from berth.kube.transport import events, pod_edits, rest, writes
from berth.scheduler.framework import pending
from berth.status import conditions
from berth.util import clocks

__all__ = ["Burst", "PendingMarks", "condition"]


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
        changed: list[pending.PodPending] = []
        refs: list[events.ObjectRef] = []
        for waiting in decision.pods:
            now = (waiting.condition, waiting.reason.message)
            if self._written.get(waiting.key) == now:
                # Still waiting for the same reason: the condition stands; the recorder counts
                # the repeat into the pod's one FailedScheduling Event (at most once a while).
                self._event(ref(waiting.key), waiting)
                continue
            self._written[waiting.key] = now
            changed.append(waiting)
            refs.append(ref(waiting.key))
        if not changed:
            return None
        return Burst(group=decision.group, pods=tuple(changed), refs=tuple(refs))

    async def write(self, burst: Burst) -> None:
        """Write the burst's conditions together, then tell each pod's Event."""
        current = [
            (waiting, ref)
            for waiting, ref in zip(burst.pods, burst.refs, strict=True)
            if self._written.get(waiting.key) == (waiting.condition, waiting.reason.message)
        ]
        if not current:
            return  # every pod of it got a newer reason meanwhile (or went)
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
        for (waiting, ref), written in zip(current, landed, strict=True):
            if written.outcome is writes.Outcome.GONE:
                self.forget(waiting.key)
                continue
            if not written.ok:
                # Not written (fenced, failed): the next decision for the pod writes it again.
                if self._written.get(waiting.key) == (waiting.condition, waiting.reason.message):
                    del self._written[waiting.key]
                continue
            self._event(ref, waiting)

    def written(self, key: str) -> tuple[str, str] | None:
        """``(reason, message)`` of the condition last written (or being written) to the pod."""
        return self._written.get(key)

    def forget(self, key: str) -> None:
        """The pod was placed or left: a later reason to wait is news again."""
        self._written.pop(key, None)

    def _event(self, ref: events.ObjectRef, waiting: pending.PodPending) -> None:
        if self._recorder is not None:
            self._recorder.record(
                ref,
                type=events.WARNING,
                reason="FailedScheduling",
                message=waiting.reason.message,
            )
