"""Waiting for preemption victims to be gone before their preemptor may start on the node.

A preemptor placed on a node where the same cycle evicted victims must not reach the kubelet
while those victims still run there: the kubelet would see it first and fail it
``OutOf<resource>``. Both executors hold such a preemptor back — the binder
(:class:`~berth.kube.binder.decisions.ApiSink`) its binding, admission
(:class:`~berth.kube.admission.admission.Admission`) its ungating — with one :class:`VictimWaits`,
shared, which the informers wake (:meth:`VictimWaits.released`) whenever a pod stops holding
capacity. Nothing is polled; each wait is bounded by the ``eviction_wait`` setting. Runs on the
event loop.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import typing

from berth.scheduler.framework import decisions
from berth.util import wakeups

__all__ = ["PodPresence", "VictimWaits", "Waited", "victims_by_node"]


class PodPresence(typing.Protocol):
    """Which pods still hold capacity (the informers' view of the cache)."""

    def holds_capacity(self, key: str, *, uid: str = "") -> bool: ...


@dataclasses.dataclass(frozen=True)
class Waited:
    """How a wait ended: ``clear`` (the victims are gone), ``abandoned`` (the preemptor no longer
    needs it) or neither — timed out, with ``staying`` the victims still there."""

    clear: bool
    abandoned: bool = False
    staying: tuple[decisions.EvictPod, ...] = ()


def victims_by_node(
    result: decisions.CycleResult,
) -> dict[str, tuple[decisions.EvictPod, ...]]:
    """The victims ``result`` evicts, by the node they are evicted from."""
    found: dict[str, list[decisions.EvictPod]] = {}
    for decision in result.decisions:
        if isinstance(decision, decisions.EvictPod):
            found.setdefault(decision.node, []).append(decision)
    return {node: tuple(evicted) for node, evicted in found.items()}


class VictimWaits:
    """Preemptors waiting for their victims; see the module docstring."""

    def __init__(self, presence: PodPresence | None, *, timeout: float) -> None:
        self._presence = presence
        self.timeout = timeout
        """Seconds a preemptor waits at most (``eviction_wait``)."""
        # pod keys (a preemptor's or a victim's) -> the waits watching them
        self._wakeups: wakeups.Wakeups[str] = wakeups.Wakeups()

    def staying(
        self, victims: collections.abc.Iterable[decisions.EvictPod]
    ) -> tuple[decisions.EvictPod, ...]:
        """The victims still holding capacity (none when nobody can tell: nothing waits)."""
        if self._presence is None:
            return ()
        return tuple(v for v in victims if self._presence.holds_capacity(v.key, uid=v.uid))

    def released(self, key: str) -> None:
        """The pod stopped holding capacity (finished or gone): wake the waits watching it."""
        self._wakeups.wake(key)

    async def wait(
        self,
        preemptors: collections.abc.Collection[str],
        victims: collections.abc.Collection[decisions.EvictPod],
        *,
        abandoned: collections.abc.Callable[[], bool],
    ) -> Waited:
        """Wait until ``victims`` are gone, ``abandoned()`` holds (checked whenever a watched
        pod, preemptors included, is released) or :attr:`timeout` passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        with self._wakeups.watching([*preemptors, *(v.key for v in victims)]) as wake:
            while True:
                wake.clear()
                if abandoned():
                    return Waited(clear=False, abandoned=True)
                staying = self.staying(victims)
                if not staying:
                    return Waited(clear=True)
                left = deadline - loop.time()
                if left <= 0:
                    return Waited(clear=False, staying=staying)
                await wake.sleep(timeout=left)

    def message(
        self, node: str, staying: collections.abc.Iterable[decisions.EvictPod], *, doing: str
    ) -> str:
        """What a preemptor's Event says when its victims outstayed the wait (``doing``:
        ``binding``, ``admitting``)."""
        names = ", ".join(v.key for v in staying)
        return (
            f"Preemption victims {names} were still on {node} after {self.timeout:g}s; "
            f"not {doing} there now, the pod will be tried again"
        )
