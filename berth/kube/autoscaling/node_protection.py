"""Nodes Berth holds keep the autoscalers' scale-down opt-outs while they hold it: the node writer.

What a node should carry is decided purely (:mod:`berth.status.nodes`: its holds — an Available
Reservation, a gang nominated there, an admission pin — and the merge patch of its annotations
that gives it ``karpenter.sh/do-not-disrupt`` and
``cluster-autoscaler.kubernetes.io/scale-down-disabled`` exactly while it holds something).
:class:`NodeProtection` applies it:

- **What it knows.** The informers tell it every Node's annotations as they change
  (:meth:`NodeProtection.node_seen`, :meth:`NodeProtection.node_gone`), so deciding costs no
  request; after every cycle :meth:`NodeProtection.offer` gathers the holds from the snapshot,
  the binder's nominations and admission's pins, and queues the nodes whose annotations are not
  what their holds ask: newly held, held differently, or no longer held (a node carrying
  Berth's record and holding nothing — also one a previous leader protected).
- **How it writes.** Through the write primitive (:meth:`berth.kube.transport.writes.Writer.update`:
  read the Node, patch at the version read, again on a conflict, fenced like every write of the
  leader), computing the patch from the Node as read, with the holds as they are when the write
  is made: a hold that ended while the write waited is never written. The Node as written is
  what the writer knows next, so a write is not repeated while the watch catches up.
- **Only Berth's.** An opt-out a user set is never recorded and never removed
  (:func:`berth.status.nodes.annotations_patch`).

Writes go one node at a time, in the order queued, on one task (:meth:`NodeProtection.run`):
holds change a few times a minute, not per pod.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging

from berth.api import core
from berth.kube.transport import writes
from berth.scheduler.snapshot import snapshots
from berth.status import nodes
from berth.util import wakeups

__all__ = ["NodeProtection"]

logger = logging.getLogger(__name__)


def _annotations(obj: core.Node) -> dict[str, str]:
    metadata = obj.get("metadata")
    found = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items()}


class NodeProtection:
    """Applies :mod:`berth.status.nodes` to the API's Nodes; see the module docstring."""

    def __init__(self, writer: writes.Writer) -> None:
        self._writer = writer
        self._annotations: dict[str, dict[str, str]] = {}  # node -> its annotations, as seen
        self._holds: dict[str, tuple[nodes.Hold, ...]] = {}  # node -> what holds it now
        self._queued: dict[str, None] = {}  # nodes to write, in order
        self._wake = wakeups.Wakeup()
        self.written = 0
        """Nodes whose annotations this writer changed (tests, metrics)."""

    # What the informers see ---------------------------------------------------------------
    def node_seen(self, obj: core.Node) -> None:
        """A Node as the watch brings it."""
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and name:
            self._annotations[name] = _annotations(obj)

    def node_gone(self, name: str) -> None:
        """The Node left: nothing to protect or clean up there."""
        self._annotations.pop(name, None)
        self._queued.pop(name, None)

    # After each cycle ---------------------------------------------------------------------
    def offer(
        self,
        snapshot: snapshots.Snapshot,
        *,
        nominated: collections.abc.Mapping[str, str],
        pinned: collections.abc.Mapping[str, str],
    ) -> None:
        """Take the holds of ``snapshot`` (with the binder's nominations and admission's pins)
        and queue every node whose annotations do not match them."""
        self._holds = nodes.holds_in(snapshot, nominated=nominated, pinned=pinned)
        recorded = (
            name
            for name, annotations in self._annotations.items()
            if nodes.PROTECTION_ANNOTATION in annotations
        )
        for name in sorted({*self._holds, *recorded}):
            known = self._annotations.get(name)
            if known is None:
                continue  # not (yet) seen by the watch: the next offer after it is
            if nodes.annotations_patch(known, self._holds.get(name, ())) is not None:
                self._queue(name)

    def holds(self, node: str) -> tuple[nodes.Hold, ...]:
        """What holds ``node`` as of the last cycle."""
        return self._holds.get(node, ())

    def _queue(self, name: str) -> None:
        if name not in self._queued:
            self._queued[name] = None
            self._wake.wake()

    # Writing --------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Write queued nodes until ``stop`` is set."""
        while not stop.is_set():
            if not self._queued:
                self._wake.clear()  # what woke it is written: the queue is empty
                await self._wake.sleep(stop=stop)
                continue
            await self.write_queued()

    async def write_queued(self) -> None:
        """Write every node queued now (tests call it directly)."""
        while self._queued:
            name = next(iter(self._queued))
            del self._queued[name]
            await self._write(name)

    async def _write(self, name: str) -> None:
        def change(current: core.Node) -> collections.abc.Mapping[str, object] | None:
            # A merge patch: an annotation that goes is written as null.
            patch = nodes.annotations_patch(_annotations(current), self._holds.get(name, ()))
            return {"metadata": {"annotations": patch}} if patch is not None else None

        written = await self._writer.update(
            f"/api/v1/nodes/{name}", change, what=f"scale-down protection of node {name}"
        )
        if written.outcome is writes.Outcome.WRITTEN:
            self.written += 1
            held = self._holds.get(name, ())
            logger.info(
                "node %s: %s",
                name,
                f"protected from scale-down ({', '.join(map(str, held))})"
                if held
                else "no longer protected from scale-down",
            )
        if written.object is not None and name in self._annotations:
            self._annotations[name] = _annotations(written.object)
