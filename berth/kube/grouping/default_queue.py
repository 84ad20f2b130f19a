"""The ``default`` queue as a Queue object: the leader creates it when it is missing.

Work that names no queue goes to ``default``, which the scheduler knows implicitly (no
guarantee, no limit, weight 1, open: :func:`berth.scheduler.snapshot.queues.default_queue`).
Implicit, it was invisible where users look: ``kubectl get bq`` had no row for it and
``kubectl berth queue default`` no usage. So each leadership term starts by creating the Queue
``default`` with exactly those values (an empty spec), as Volcano's scheduler creates its
``default`` Queue at startup; from then on it is a Queue like any other, whose status (usage,
fair share, pods pending and running) the status writer fills in.

It is only ever created, never written again: a user may set its guarantee, limit or weight,
and those are kept. Deleted, it comes back at the next leadership term; meanwhile the
scheduler's implicit ``default`` takes the same work, so nothing waits for it.
"""

from __future__ import annotations

import asyncio
import logging

from berth.api import keys, queues
from berth.kube.transport import writes
from berth.util import wakeups

__all__ = ["MANAGED_BY", "PATH", "body", "keep"]

logger = logging.getLogger(__name__)

PATH = f"/apis/{keys.API_VERSION}/{queues.PLURAL}"
MANAGED_BY = "berth"
"""The ``app.kubernetes.io/managed-by`` label of the Queue Berth created."""


def body() -> dict[str, object]:
    """The Queue ``default`` as Berth creates it: the implicit queue's values (an empty spec)."""
    return {
        "apiVersion": keys.API_VERSION,
        "kind": queues.KIND,
        "metadata": {
            "name": keys.DEFAULT_QUEUE,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
        },
        "spec": {},
    }


async def keep(
    writer: writes.Writer, stop: asyncio.Event, *, first: float = 1.0, cap: float = 30.0
) -> None:
    """Create the Queue ``default`` unless it exists, a failure tried again after ``first``
    seconds, doubling up to ``cap``; then wait for ``stop`` (a leader component ends only
    when asked)."""
    delay = first
    while not stop.is_set():
        written = await writer.create(PATH, body(), what=f"Queue {keys.DEFAULT_QUEUE}")
        if written.outcome is writes.Outcome.WRITTEN:
            logger.info("created Queue %s: work naming no queue goes there", keys.DEFAULT_QUEUE)
        if written.outcome not in (writes.Outcome.FAILED, writes.Outcome.GONE):
            break  # created, there already, or no longer ours to write (fenced)
        # FAILED, or GONE: Queues are not served yet (Berth's CRDs not installed); try again.
        if not await wakeups.sleep_or_stop(delay, stop=stop):
            delay = min(delay * 2, cap)
    await wakeups.first_set(stop)
