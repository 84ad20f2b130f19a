"""Whether a Queue's ``spec.parent`` fits the queues that exist: the check CEL cannot make.

CEL sees one object; a parent that closes a cycle, a parent that does not exist, or a guarantee
the parent's limit can never cover are facts about several Queues. :func:`check` answers them
for the admission webhook (:mod:`berth.operator.webhooks`), which refuses what can never work
(a cycle, a guarantee above the parent's limit) and only warns about a missing parent: a
directory of Queues applied at once may create a child before its parent, and the scheduler
already keeps such a queue out of the tree until the parent appears.
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.scheduler.snapshot import queues

__all__ = ["ParentCheck", "check"]


@dataclasses.dataclass(frozen=True)
class ParentCheck:
    """What is wrong with a queue's parent: ``refusal`` refuses it, ``warnings`` let it in."""

    refusal: str | None = None
    warnings: tuple[str, ...] = ()


def _cycle(queue: queues.QueueInfo, others: collections.abc.Mapping[str, queues.QueueInfo]) -> str:
    path = [str(queue.name)]
    current = queue.parent
    while current is not None and str(current) not in path:
        path.append(str(current))
        found = others.get(str(current))
        current = found.parent if found is not None else None
    if current is None:
        return ""
    path.append(str(current))
    return " -> ".join(path)


def check(
    queue: queues.QueueInfo, /, *, others: collections.abc.Mapping[str, queues.QueueInfo]
) -> ParentCheck:
    """Check ``queue`` (as it would be stored) against ``others``, every other Queue by name."""
    if queue.parent is None:
        return ParentCheck()
    parent_name = str(queue.parent)
    if parent_name == str(queue.name):
        return ParentCheck(refusal=f"spec.parent: queue {queue.name} cannot be its own parent")
    cycle = _cycle(queue, others)
    if cycle:
        return ParentCheck(
            refusal=f"spec.parent: {parent_name} would make a cycle of queues ({cycle})"
        )
    parent = others.get(parent_name)
    if parent is None:
        return ParentCheck(
            warnings=(
                f"spec.parent: queue {parent_name} does not exist; queue {queue.name} takes no "
                f"work until it does",
            )
        )
    if parent.limit is not None:
        above = sorted(
            name
            for name, amount in queue.guaranteed.items()
            if name in parent.limit and amount > parent.limit[name]
        )
        if above:
            return ParentCheck(
                refusal=(
                    f"spec.guaranteed: {', '.join(above)} above the limit of parent queue "
                    f"{parent_name}; the parent can never give that much"
                )
            )
    return ParentCheck()
