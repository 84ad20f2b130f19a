"""Why gated pods wait, told as ``NotAdmitted`` Events; why a group's admission failed.

Why-pending reasons of pods held by Berth's gate become Normal ``NotAdmitted`` Events (when
they change), never a ``PodScheduled=False/Unschedulable`` condition: admission keeps the gated
pods' ``MarkPending`` decisions from the inner sink, so their condition stays
``SchedulingGated``. A pod that kube-scheduler refused where Berth pinned it is told why
(kube-scheduler's words, verbatim) and how long it backs off. A group whose admission was
rejected carries a note on its reason until it is admitted again.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types

from berth.kube.admission import pod_requests, rejections
from berth.kube.transport import events
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.snapshot import pods, snapshots
from berth.status import conditions

__all__ = ["NotAdmitted"]


class NotAdmitted:
    """The reasons told to gated pods and the notes on groups; see the module docstring."""

    def __init__(
        self,
        *,
        rejections: rejections.Rejections,
        requests: pod_requests.PodRequests,
    ) -> None:
        self._rejections = rejections
        self._requests = requests  # posts the Events
        self._reasons: dict[str, reasons.Reason] = {}  # pod key -> the NotAdmitted reason last sent
        self.notes: dict[str, reasons.Reason] = {}
        """Group -> why its last admission failed (until it is admitted again)."""

    @property
    def told(self) -> collections.abc.Mapping[str, reasons.Reason]:
        """Pod key -> the reason last told it."""
        return self._reasons

    def forget(self, key: str) -> None:
        """The pod was admitted, or left: a reason to wait is news again."""
        self._reasons.pop(key, None)

    def group_why(
        self, why: collections.abc.Mapping[str, reasons.Reason]
    ) -> collections.abc.Mapping[str, reasons.Reason]:
        """The cycle's group reasons with the groups' notes appended."""
        if not self.notes:
            return why
        # Copied only for notes: a parked backlog's reasons are many.
        noted = dict(why)
        for group_key, note in sorted(self.notes.items()):
            noted[group_key] = _noted(noted[group_key], note) if group_key in noted else note
        return types.MappingProxyType(noted)

    def explain(
        self, decision: decisions.Unschedulable, *, seen: snapshots.Snapshot | None
    ) -> None:
        """Tell the gated pod why it waits (``seen``: the snapshot the cycle saw)."""
        why = decision.reason
        # The snapshot's view of the pod, not a parse of it: this runs for every gated pod
        # that waits, every cycle its reason is given.
        info = seen.pods.get(decision.key) if seen is not None else None
        group = info.pod_group if info is not None else None
        _, last = self._rejections.refused(decision.key, group=group)
        if last is not None and last.node in self._rejections.nodes_of(decision.key, group=group):
            # The session's reason says the node does not match; the refusal says why not.
            why = why.explained_by(
                last.reason(message=f"kube-scheduler refused it on {last.node}: {last.message}")
            )
        self.tell(decision.key, why)

    def tell(self, key: str, why: reasons.Reason) -> None:
        """A ``NotAdmitted`` Event saying ``why`` the gated pod waits (when that changed)."""
        if self._reasons.get(key) == why:
            return
        self._reasons[key] = why
        self._requests.event(key, type=events.NORMAL, reason="NotAdmitted", message=why.message)

    def backing_off(self, info: pods.PodInfo, *, until: float) -> None:
        """Tell the gated pod it waits out its backoff after kube-scheduler's refusals."""
        count, last = self._rejections.refused(info.key, group=info.pod_group)
        message = (
            f"backing off after {count} admission rejection(s): admitted again no sooner than "
            f"{conditions.timestamp(until)}"
        )
        if last is not None:
            message += f"; last refused on {last.node}: {last.message}"
        why = reasons.new(
            reasons.ReasonCode.ADMISSION_REJECTED,
            message,
            rejections=count,
            retryAt=conditions.timestamp(until),
        )
        self.tell(info.key, why)


def _noted(why: reasons.Reason, note: reasons.Reason) -> reasons.Reason:
    """The scheduler's reason for a group with the last admission rejection appended; the
    scheduler's code stands (it says why the group waits now)."""
    return dataclasses.replace(why, message=f"{why.message}; {note.message}")
