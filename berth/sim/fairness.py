"""Fair-share arithmetic for the simulator's reports: weighted shares and Jain's index.

The report compares what each queue got with what it was entitled to. The entitlement here is
the textbook one, computed from the scenario alone (the scheduler's own Proportion plugin may
later publish a live one): per resource, every queue first gets its ``guaranteed`` amount,
then the rest of its parent's share is split between siblings in proportion to ``weight``
(water-filling: a queue capped by its ``limit`` gives what it cannot take back to the others).
Top-level queues share the whole cluster; children share their parent's part.

Given each queue's *demand* (what it runs plus what it waits for), the same split becomes the
work-conserving max-min allocation: a queue never gets more than it asks for and what it does
not ask for goes to the others. That is the yardstick Jain's index is taken against.

Jain's index ``(Σx)² / (n·Σx²)`` of the queues' allocation-to-fair-share ratios is 1 when
every queue got the same fraction of its entitlement and ``1/n`` when one queue got it all.
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.api import resources

__all__ = ["QueueShape", "jain_index", "weighted_fair_shares"]


@dataclasses.dataclass(frozen=True)
class QueueShape:
    """What the fair-share split needs to know about one queue."""

    name: str
    parent: str | None
    weight: int
    guaranteed: resources.ResourceList
    limit: resources.ResourceList | None  # None: no cap; a resource it does not name: no cap


def weighted_fair_shares(
    capacity: collections.abc.Mapping[str, int],
    *,
    queues: collections.abc.Sequence[QueueShape],
    demand: collections.abc.Mapping[str, collections.abc.Mapping[str, int]] | None = None,
) -> dict[str, resources.ResourceList]:
    """Every queue's fair share of ``capacity``, in milli-units (rounded down).

    Without ``demand`` it is each queue's entitlement when every queue wants everything; with
    it (queue name -> resources, absent meaning nothing) no queue gets more than it demands.
    """
    names = {q.name for q in queues}
    children: dict[str | None, list[QueueShape]] = {}
    for queue in sorted(queues, key=lambda q: q.name):
        parent = queue.parent if queue.parent in names else None
        children.setdefault(parent, []).append(queue)
    wants = _subtree_demand(children, demand) if demand is not None else None
    shares: dict[str, dict[str, int]] = {}
    pending: list[tuple[str | None, collections.abc.Mapping[str, int]]] = [(None, capacity)]
    while pending:
        parent, budget = pending.pop()
        siblings = children.get(parent, [])
        if not siblings:
            continue
        split: dict[str, dict[str, int]] = {q.name: {} for q in siblings}
        for resource in sorted(budget):
            caps: list[int | None] = []
            for q in siblings:
                cap = q.limit[resource] if q.limit is not None and resource in q.limit else None
                if wants is not None:
                    want = wants[q.name].get(resource, 0)
                    cap = want if cap is None else min(cap, want)
                caps.append(cap)
            amounts = _split(
                budget[resource],
                weights=[q.weight for q in siblings],
                floors=[q.guaranteed[resource] for q in siblings],
                caps=caps,
            )
            for queue, amount in zip(siblings, amounts, strict=True):
                split[queue.name][resource] = amount
        for queue in siblings:
            shares[queue.name] = split[queue.name]
            pending.append((queue.name, split[queue.name]))
    return {name: resources.ResourceList(shares[name]) for name in sorted(shares)}


def _subtree_demand(
    children: dict[str | None, list[QueueShape]],
    demand: collections.abc.Mapping[str, collections.abc.Mapping[str, int]],
) -> dict[str, dict[str, int]]:
    """A queue's demand plus its descendants' (a parent asks for what its children ask)."""
    out: dict[str, dict[str, int]] = {}

    def visit(queue: QueueShape) -> dict[str, int]:
        total = dict(demand.get(queue.name, {}))
        for child in children.get(queue.name, []):
            for name, amount in visit(child).items():
                total[name] = total.get(name, 0) + amount
        out[queue.name] = total
        return total

    for root in children.get(None, []):
        visit(root)
    return out


def _split(
    total: int,
    *,
    weights: list[int],
    floors: list[int],
    caps: list[int | None],
) -> list[int]:
    """Water-fill ``total`` of one resource over siblings: guarantees, then weights, caps."""
    given = [_capped(floor, cap) for floor, cap in zip(floors, caps, strict=True)]
    remaining = max(total - sum(given), 0)
    open_ = [i for i, cap in enumerate(caps) if cap is None or given[i] < cap]
    while remaining > 0 and open_:
        weight = sum(weights[i] for i in open_)
        offers = {i: remaining * weights[i] // weight for i in open_}
        capped = [i for i in open_ if (cap := caps[i]) is not None and given[i] + offers[i] >= cap]
        if not capped:
            for i in open_:
                given[i] += offers[i]
            break
        # Queues that hit their limit take only up to it; the rest is shared again.
        for i in capped:
            cap = caps[i]
            assert cap is not None
            remaining -= cap - given[i]
            given[i] = cap
        open_ = [i for i in open_ if i not in capped]
    return given


def _capped(amount: int, cap: int | None) -> int:
    return amount if cap is None else min(amount, cap)


def jain_index(values: collections.abc.Sequence[float]) -> float | None:
    """Jain's fairness index of ``values``; ``None`` when there is nothing to compare."""
    if not values:
        return None
    square_sum = sum(v * v for v in values)
    if square_sum == 0:
        return None
    return sum(values) ** 2 / (len(values) * square_sum)
