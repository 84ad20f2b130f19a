"""Releasing a group's admitted pods whole: pin every one, then remove every gate.

A ``BindPod`` of a gated pod becomes a pending allocation (:mod:`berth.kube.admission.
allocations`); :meth:`Pinning.admit` then pins the batch — a required node affinity
``matchFields metadata.name In [node]`` added to each of its terms (allowed while gated), and the
annotations ``admitted-node`` / ``admitted-at`` — and only when *every* pod the cycle admitted of
the same group is pinned are the gates removed, together: a gang is released whole or not at all
(a pin that fails releases nothing; the group is tried again next cycle — its pods already pinned
keep their pin, since a gated pod's node affinity may only narrow, and the session sees it).
Before the pins, ``before_pin`` withdraws the gang's CapacityBuffer, if it asked with one
(:mod:`berth.kube.autoscaling.capacity_requests`: a buffer still asking once they bind buys a
node). kube-scheduler then binds.

A pod admitted onto a node from which the same cycle evicted victims stays pinned and gated
(assumed in the cache) until those victims are gone, as the binder holds a preemptor's binding
(the shared :class:`~berth.kube.binder.victim_waits.VictimWaits`): ungated at once, kube-scheduler
could bind it while the victims still run and the kubelet would fail it ``OutOf<resource>``. If
they outstay the wait, the batch's allocations are dropped (capacity released, a
``FailedScheduling`` Event names the victims) and a later cycle admits the pods again. A pod that
names Berth's own scheduler is ungated and bound by Berth (POST binding) instead.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging

from berth.api import core
from berth.kube.admission import admission_states as states
from berth.kube.admission import allocations, pod_requests
from berth.kube.binder import victim_waits
from berth.kube.transport import errors, events, writes
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import wire
from berth.util import clocks

__all__ = ["Batch", "Pinning"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Batch:
    """Pods of one group (or one pod) the cycle admitted: released together or not at all."""

    group: str | None
    binds: tuple[decisions.BindPod, ...]
    ours: frozenset[str]  # keys of pods naming Berth's scheduler: Berth binds them itself
    victims: tuple[decisions.EvictPod, ...] = ()  # evicted by the cycle from the pods' nodes


class Pinning:
    """Pins batches of admitted pods and removes their gates; see the module docstring.

    ``move`` applies an event to a pending allocation (admission's state machine); ``objects``
    and ``pinned`` are admission's records of the raw pods and of the markers it wrote.
    """

    def __init__(
        self,
        *,
        allocations: allocations.Allocations,
        requests: pod_requests.PodRequests,
        move: collections.abc.Callable[[allocations.Allocation, states.Event], None],
        clock: clocks.Clock,
        objects: dict[str, core.Pod],
        pinned: dict[str, str],
        victims: victim_waits.VictimWaits | None = None,
        before_pin: collections.abc.Callable[
            [collections.abc.Collection[str]], collections.abc.Awaitable[None]
        ]
        | None = None,
    ) -> None:
        self._allocations = allocations
        self._requests = requests
        self._move = move
        self._clock = clock
        self._objects = objects
        self._pinned = pinned
        # The binder's waits for preemption victims (None: nothing waits, as without presence).
        self._victims = victims
        # Awaited with a batch's pod keys before they are pinned: the capacity requests
        # withdraw the gang's CapacityBuffer first (berth.kube.autoscaling.capacity_requests).
        self._before_pin = before_pin
        self.waiting: set[asyncio.Task[None]] = set()
        """Batches waiting for their victims."""

    async def admit(self, admit: Batch) -> None:
        """Pin every pod of the batch; only if all pins landed, remove their gates."""
        if self._before_pin is not None:
            try:
                await self._before_pin([b.key for b in admit.binds])
            except asyncio.CancelledError:
                raise
            except Exception:
                # Admitting matters more than the autoscaler's view: pin anyway.
                logger.exception("withdrawing the capacity request of %s failed", admit.group)
        pinned = await asyncio.gather(*(self._pin(b) for b in admit.binds))
        if not all(version is not None for version in pinned):
            self.drop(admit, states.Event.PIN_FAILED)
            self._requests.log_failure(
                "pin", f"could not pin every pod of {admit.group}: released none; retrying"
            )
            return
        staying = self._victims.staying(admit.victims) if self._victims is not None else ()
        if staying:
            # Off the worker: a wait may take up to eviction_wait, other batches go on.
            task = asyncio.get_running_loop().create_task(
                self._ungate_after_victims(admit, victims=staying),
                name=f"admitting {admit.group} after its victims",
            )
            self.waiting.add(task)
            task.add_done_callback(self.waiting.discard)
            return
        await self._ungate_all(admit, versions=pinned)

    async def _ungate_all(
        self, admit: Batch, *, versions: collections.abc.Sequence[str | None]
    ) -> None:
        await asyncio.gather(
            *(
                self._ungate(b, version=v, bind=b.key in admit.ours)
                for b, v in zip(admit.binds, versions, strict=True)
                if v is not None
            )
        )

    async def _ungate_after_victims(
        self, admit: Batch, *, victims: collections.abc.Sequence[decisions.EvictPod]
    ) -> None:
        """Keep the pinned batch gated until ``victims`` are gone, then ungate it; when they
        outstay the wait (or a pod of the batch goes), release the batch for a later cycle."""
        assert self._victims is not None
        keys_ = [b.key for b in admit.binds]
        try:
            waited = await self._victims.wait(
                keys_, victims, abandoned=lambda: not all(k in self._allocations for k in keys_)
            )
        except BaseException:
            # Stopped, or a bug: nothing will ungate them.
            self.drop(admit, states.Event.VICTIMS_STAYED)
            raise
        if waited.clear:
            # The informers may have seen the pins since: ungate at the newest version known.
            versions = [
                str(
                    wire.part(wire.part(self._objects.get(b.key)).get("metadata")).get(
                        "resourceVersion"
                    )
                    or ""
                )
                for b in admit.binds
            ]
            await self._ungate_all(admit, versions=versions)
            return
        self.drop(admit, states.Event.VICTIMS_STAYED)
        if waited.abandoned:
            logger.info("a pod of %s went while it waited for victims; released it", admit.group)
            return
        for bind in admit.binds:
            staying = [v for v in waited.staying if v.node == bind.node]
            if staying:
                message = self._victims.message(bind.node, staying, doing="admitting")
            else:
                names = ", ".join(v.key for v in waited.staying)
                message = f"released with its group: victims {names} were still on their nodes"
            self._requests.event(
                bind.key, type=events.WARNING, reason="FailedScheduling", message=message
            )

    def drop(self, admit: Batch, event: states.Event) -> None:
        """Tell the batch's allocations ``event`` (those still pinning end: the gang goes
        whole or not at all)."""
        for bind in admit.binds:
            allocation = self._allocations.get(bind.key)
            if allocation is not None:
                self._move(allocation, event)

    async def _pin(self, bind: decisions.BindPod) -> str | None:
        """Write the pin and the admitted annotations at the version read (the write
        primitive reads again on a conflict); the new resourceVersion, None on failure."""
        allocation = self._allocations.get(bind.key)
        if bind.key not in self._objects or allocation is None:
            return None
        now = self._clock.now()
        self._pinned[bind.key] = allocation.uid  # before the send: it may land unanswered
        written = await self._requests.pin(bind.key, node=bind.node, now=now)
        if written.outcome is not writes.Outcome.WRITTEN or written.object is None:
            return None
        answer = written.object  # the API server answers the pod
        self._objects[bind.key] = answer
        allocation = self._allocations.get(bind.key)
        if allocation is not None:
            self._move(allocation, states.Event.PINNED)
        return str(wire.part(answer.get("metadata")).get("resourceVersion") or "")

    async def _ungate(self, decision: decisions.BindPod, *, version: str, bind: bool) -> None:
        """Remove Berth's gate (keeping the others); Berth binds pods naming its scheduler."""
        key = decision.key
        allocation = self._allocations.get(key)
        obj = self._objects.get(key)
        if allocation is None or obj is None:
            return
        # Ungated before the request: an informer event of the ungated pod may come first.
        state_before, since_before = allocation.state, allocation.since
        self._move(allocation, states.Event.UNGATED)
        allocation.since = self._clock.now()
        try:
            self._objects[key] = await self._requests.remove_gate(key, obj, version=version)
        except errors.KubeError as exc:
            # Still gated (or gone): the next cycle offers it again.
            self._requests.log_failure("ungate", f"removing the gate of pod {key} failed: {exc}")
            allocation.state, allocation.since = state_before, since_before
            self._move(allocation, states.Event.UNGATE_FAILED)
            return
        if bind:
            await self._bind(decision)

    async def _bind(self, decision: decisions.BindPod) -> None:
        """Bind a pod naming Berth's scheduler once its gate is gone (nobody else will)."""
        if not await self._requests.bind(decision):
            # Ungated and Berth's: the inner sink binds it from the next cycle on.
            allocation = self._allocations.get(decision.key)
            if allocation is not None:
                self._move(allocation, states.Event.BIND_FAILED)
