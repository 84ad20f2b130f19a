"""The reservation pods of shared GPUs, and their shares' group labels: the writer.

What to write is decided purely (:mod:`berth.status.gpu_reservations`: a reservation pod per
device Berth's shares use, none where they use none, KAI's group labels on the shares).
:class:`GpuReservations` applies it:

- **What it knows.** After every cycle :meth:`GpuReservations.offer` plans from the snapshot,
  which already counts a share being bound (the cache assumes it with its devices), so a
  reservation pod is asked for as soon as its first share is bound.
- **How it writes.** On one task (:meth:`GpuReservations.run`), through the write primitive
  (fenced like every write of the leader): creations (a pod of that name existing already is
  kept), deletions with the reservation pod's UID as precondition (a pod of that name made
  since is never the one deleted), label merge patches of the shares. A write that went
  through is not repeated while the plan still asks it (the watch has not brought it yet); one
  that failed is tried again at the next plan.
- **Where the namespace is missing** (``runai-reservation``: the chart creates it) a warning
  says so once, and shares still run: only the device plugin does not see their devices
  taken.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import typing

from berth.kube.transport import writes
from berth.scheduler.snapshot import gpushare
from berth.status import gpu_reservations
from berth.util import wakeups

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import snapshots

__all__ = ["GpuReservations"]

logger = logging.getLogger(__name__)

_PODS = f"/api/v1/namespaces/{gpushare.RESERVATION_NAMESPACE}/pods"


def _pod_path(key: str) -> str:
    namespace, name = key.split("/", 1)
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


class GpuReservations:
    """Applies :mod:`berth.status.gpu_reservations`; see the module docstring."""

    def __init__(
        self,
        writer: writes.Writer,
        *,
        schedulers: collections.abc.Container[str],
        image: str = gpu_reservations.IMAGE,
    ) -> None:
        self._writer = writer
        self._schedulers = schedulers
        self._image = image
        self._plan = gpu_reservations.Plan()
        self._wake = wakeups.Wakeup()
        # What went through and is still asked for (the watch has not shown it yet).
        self._created: set[tuple[str, int]] = set()
        self._deleted: set[str] = set()  # UIDs
        self._labelled: dict[str, str] = {}  # pod key -> the patch sent, as text
        self._missing_namespace = False

    def offer(self, snapshot: snapshots.Snapshot) -> None:
        """Plan from ``snapshot`` (after a cycle); the task writes what is new."""
        plan = gpu_reservations.plan(snapshot, schedulers=self._schedulers)
        self._created &= set(plan.create)
        self._deleted &= {uid for _, uid in plan.delete}
        self._labelled = {
            k: v for k, v in self._labelled.items() if k in plan.labels and v == str(plan.labels[k])
        }
        self._plan = plan
        if self.pending():
            self._wake.wake()

    def pending(self) -> bool:
        """Whether the plan asks a write not made yet."""
        plan = self._plan
        return (
            any(item not in self._created for item in plan.create)
            or any(uid not in self._deleted for _, uid in plan.delete)
            or any(self._labelled.get(k) != str(v) for k, v in plan.labels.items())
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Write what the plans ask until ``stop``."""
        while not stop.is_set():
            await self._wake.sleep(stop=stop)  # consumes the wake-up: this pass covers it
            if stop.is_set():
                return
            await self._apply(self._plan)

    async def _apply(self, plan: gpu_reservations.Plan) -> None:
        for node, device in plan.create:
            if (node, device) in self._created:
                continue
            body = gpu_reservations.reservation_pod(node, device, image=self._image)
            name = body["metadata"]["name"]
            written = await self._writer.create(_PODS, body, what=f"reservation pod {name}")
            if written.outcome in (writes.Outcome.WRITTEN, writes.Outcome.UNCHANGED):
                self._created.add((node, device))
            elif written.outcome is writes.Outcome.GONE and not self._missing_namespace:
                self._missing_namespace = True
                logger.warning(
                    "namespace %s does not exist: shared GPUs get no reservation pods, so the "
                    "device plugin does not see their devices taken (the chart creates it)",
                    gpushare.RESERVATION_NAMESPACE,
                )
        for name, uid in plan.delete:
            if uid in self._deleted:
                continue
            path = f"{_PODS}/{name}"
            written = await self._writer.delete(path, uid=uid, what=f"reservation pod {name}")
            if written.outcome in (writes.Outcome.WRITTEN, writes.Outcome.GONE):
                self._deleted.add(uid)
        for key, patch in plan.labels.items():
            text = str(patch)
            if self._labelled.get(key) == text:
                continue
            written = await self._writer.patch(_pod_path(key), patch, what=f"pod {key}")
            if written.outcome in (writes.Outcome.WRITTEN, writes.Outcome.GONE):
                self._labelled[key] = text
