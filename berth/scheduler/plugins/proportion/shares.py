"""The Proportion plugin's pure maths: hierarchical weighted DRF shares over the queue tree.

Nothing here knows about sessions: the functions take the tree (:mod:`.tree`) and ``int64``
vectors over the node table's resource columns and return new ones, so every rule is tested
on its own.

**Shares** (:func:`fair_shares`). Each queue's *cap* is what it could use: a leaf's demand
(what it runs plus what it waits for), a parent's the sum of its children's, both capped by
``limit``. Top-down from the cluster's capacity, each level splits its budget between siblings
(:func:`split_level`):

1. guarantees first, higher ``priority`` first (then by name): ``min(guaranteed, cap, left)``;
2. what is left goes to the siblings by priority tier (the highest tier is served until its
   caps are met, then the next), and inside a tier by weight, by dominant resource
   (:func:`drf_fill`);
3. each queue's result is the budget its children split in turn.

With a usage history (Proportion ``usageHalfLifeSeconds``), step 2's weights are first
tilted by each sibling's decayed usage (:mod:`.decay`).

A share is therefore *demand-aware*: an idle queue's guarantee is lent to the others (it is
not in anybody's share while idle) and comes back as soon as the queue asks for it, which is
what the reclaim action acts on.

**DRF filling** (:func:`drf_fill`). Progressive filling: every queue's *dominant share*
(largest fraction of any resource's scale it would get) rises at the rate of its weight, each
resource handed out in proportion to the queue's demand for it, until the queue's cap is met or
the resource runs out. Resources run out independently (a queue stops getting cpu when the cpu
is gone but keeps getting memory), which keeps the split work-conserving for queues whose
aggregate demand mixes shapes; likewise a limit stops the resource it names without slowing
the others (the pace follows the demand, the cap the limit). For queues of one shape this is
weighted DRF exactly: weights 1:2:3 split every resource 1:2:3.
"""

from __future__ import annotations

import collections.abc
import dataclasses

import numpy as np
import numpy.typing as npt

from berth.scheduler.plugins.proportion import decay
from berth.scheduler.plugins.proportion import tree as trees

__all__ = [
    "Claim",
    "dominant_share",
    "drf_fill",
    "fair_shares",
    "split_level",
]

IntArray = trees.IntArray
FloatArray = npt.NDArray[np.float64]


def dominant_share(vec: IntArray, *, scale: IntArray) -> float:
    """The largest fraction of ``scale`` that ``vec`` takes of any resource (0 for an empty
    vector; resources whose scale is 0 do not count)."""
    mask = scale > 0
    if not mask.any():
        return 0.0
    return float(np.max(vec[mask] / scale[mask], initial=0.0))


def drf_fill(
    budget: IntArray,
    *,
    caps: collections.abc.Sequence[IntArray],
    weights: collections.abc.Sequence[float],
    scale: IntArray,
    profiles: collections.abc.Sequence[IntArray] | None = None,
) -> list[IntArray]:
    """Split ``budget`` between claimants by weighted progressive filling (module docstring).

    Claimant ``i`` never gets more than ``caps[i]``; the results never sum above ``budget``.
    ``scale`` (the cluster's capacity) turns amounts into shares. ``profiles[i]`` is the shape
    claimant ``i`` asks in (its demand before a limit cut one resource short: the limit stops
    that resource, the others keep their pace); ``caps[i]`` when not given. Deterministic.
    """
    count = len(caps)
    if count == 0:
        return []
    cap = np.maximum(np.array(caps, dtype=np.int64).reshape(count, -1), 0)
    asked = cap if profiles is None else np.array(profiles, dtype=np.int64).reshape(count, -1)
    shape: FloatArray = np.maximum(asked, 0).astype(np.float64)
    valid = scale > 0
    safe_scale = np.where(valid, scale, 1).astype(np.float64)
    # Each claimant's dominant share rises at the pace of its weight: resource r comes at
    # weight * shape_r / dominant(shape) per unit of time.
    dominant = np.where(valid, shape / safe_scale, 0.0).max(axis=1, initial=0.0)
    pace: FloatArray = np.zeros_like(shape)
    wanting = dominant > 0
    pace[wanting] = (
        shape[wanting]
        * np.asarray(weights, dtype=np.float64)[wanting, None]
        / dominant[wanting, None]
    )
    given = np.zeros_like(cap)
    for col in range(len(budget)):
        amount = int(budget[col])
        demand = np.where(pace[:, col] > 0, cap[:, col], 0)
        if amount <= 0 or not demand.any():
            continue
        if int(demand.sum()) <= amount:
            given[:, col] = demand
            continue
        given[:, col] = _fill_column(amount, demand=demand, pace=pace[:, col])
    return [given[i] for i in range(count)]


def _fill_column(amount: int, *, demand: IntArray, pace: FloatArray) -> IntArray:
    """One resource: ``min(pace[i] * t, demand[i])`` summed equals ``amount``; solve ``t``.

    Claimants reach their demand in order of ``demand / pace``; between two of those moments
    the amount handed out grows linearly, so ``t`` is found segment by segment.
    """
    active = np.flatnonzero(demand > 0)
    finish = np.full(len(demand), np.inf)
    finish[active] = demand[active] / pace[active]
    order = active[np.argsort(finish[active], kind="stable")]
    capped = 0.0  # demand of claimants already at their cap
    # Growth per unit t of the claimants not yet capped, summed from the end: subtracting each
    # pace from a running total can round to zero next to amounts of 10**15 milli-units.
    rates = np.cumsum(pace[order][::-1])[::-1]
    t = 0.0
    for position, i in enumerate(order):
        rate = float(rates[position])
        at_cap = capped + rate * float(finish[i])
        if at_cap >= amount:
            # Never before the last claimant capped: rounding can put the crossing there.
            t = max(t, (amount - capped) / rate)
            break
        capped += float(demand[i])
        t = float(finish[i])
    exact = np.minimum(pace * t, demand)
    got = np.minimum(np.floor(exact).astype(np.int64), demand)
    # The whole amount is handed out (demand exceeds it): the milli-units floor() left over
    # go one each to the largest remainders (ties to the lower index), as seats are
    # apportioned; float rounding can leave a few more, or a few too many.
    short = amount - int(got.sum())
    while short > 0:
        room = np.flatnonzero(got < demand)
        if room.size == 0:
            break
        if short >= room.size:  # more left than one each: spread it evenly first
            extra = np.minimum(demand[room] - got[room], short // room.size)
            got[room] += extra
            short -= int(extra.sum())
            continue
        rest = exact[room] - got[room]
        chosen = room[np.argsort(-rest, kind="stable")][:short]
        got[chosen] += 1
        short -= chosen.size
    while short < 0:
        biggest = int(np.argmax(got))
        taken = min(-short, int(got[biggest]))
        got[biggest] -= taken
        short += taken
    return got


@dataclasses.dataclass(frozen=True, eq=False)
class Claim:
    """One sibling at a level: what it is guaranteed, what it could use, weight and priority."""

    guaranteed: IntArray
    cap: IntArray
    weight: int
    priority: int
    profile: IntArray | None = None  # the shape it asks in (see drf_fill); cap when None
    usage: float = 0.0  # its decayed usage (decay.UsageHistory), when the history is on


def _profile(claim: Claim) -> IntArray:
    return claim.cap if claim.profile is None else claim.profile


def split_level(
    budget: IntArray, *, claims: collections.abc.Sequence[Claim], scale: IntArray
) -> list[IntArray]:
    """Split one level's ``budget`` between siblings (``claims`` sorted by name): guarantees
    by priority, then the rest by priority tier and weight (module docstring)."""
    left = np.maximum(budget, 0).astype(np.int64)
    got = [np.zeros_like(left) for _ in claims]
    weights: list[float] = [c.weight for c in claims]
    if any(c.usage > 0 for c in claims):
        weights = decay.tilt(
            weights, [c.usage for c in claims], active=[bool((c.cap > 0).any()) for c in claims]
        )
    by_priority = sorted(range(len(claims)), key=lambda i: (-claims[i].priority, i))
    for i in by_priority:
        take = np.minimum(np.minimum(claims[i].guaranteed, claims[i].cap), left)
        got[i] = np.maximum(take, 0)
        left = left - got[i]
    for priority in sorted({c.priority for c in claims}, reverse=True):
        tier = [i for i in by_priority if claims[i].priority == priority]
        extra = drf_fill(
            left,
            caps=[claims[i].cap - got[i] for i in tier],
            weights=[weights[i] for i in tier],
            scale=scale,
            profiles=[_profile(claims[i]) for i in tier],
        )
        for i, more in zip(tier, extra, strict=True):
            got[i] = got[i] + more
            left = left - more
    return got


def fair_shares(
    tree: trees.QueueTree,
    *,
    capacity: IntArray,
    demand: collections.abc.Mapping[str, IntArray],
    scale: IntArray | None = None,
    usage: collections.abc.Mapping[str, float] | None = None,
) -> dict[str, IntArray]:
    """Every usable queue's entitlement (module docstring), by name.

    ``demand`` is by leaf queue (what it runs plus what it waits for; absent means nothing);
    ``capacity`` is what the root splits; ``scale`` turns amounts into shares (``capacity``
    when not given). ``usage`` (by queue, any level) is the decayed usage that tilts each
    level's weights (:mod:`.decay`); none: the weights alone.
    """
    scale = capacity if scale is None else scale
    zero = np.zeros(len(tree.resources), dtype=np.int64)
    caps: dict[str, IntArray] = {}
    wants: dict[str, IntArray] = {}  # demand before limits: the shape a queue asks in

    def cap_of(name: str) -> IntArray:
        node = tree.nodes[name]
        if node.leaf:
            wanted = np.maximum(demand.get(name, zero), 0)
            wants[name] = wanted
        else:
            kids = [cap_of(kid) for kid in node.children]
            wanted = np.sum(kids, axis=0)
            wants[name] = np.sum([wants[kid] for kid in node.children], axis=0)
        caps[name] = np.minimum(wanted, node.limit)
        return caps[name]

    for root in tree.roots:
        cap_of(root)
    shares: dict[str, IntArray] = {}
    levels: list[tuple[tuple[str, ...], IntArray]] = [(tree.roots, capacity)]
    while levels:
        names, budget = levels.pop()
        claims = [
            Claim(
                guaranteed=tree.nodes[n].guaranteed,
                cap=caps[n],
                weight=tree.nodes[n].weight,
                priority=tree.nodes[n].priority,
                profile=wants[n],
                usage=usage.get(n, 0.0) if usage else 0.0,
            )
            for n in names
        ]
        for name, share in zip(names, split_level(budget, claims=claims, scale=scale), strict=True):
            shares[name] = share
            if tree.nodes[name].children:
                levels.append((tree.nodes[name].children, share))
    return {name: shares[name] for name in sorted(shares)}
