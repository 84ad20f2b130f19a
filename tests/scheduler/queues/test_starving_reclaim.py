"""Reclaim acts for starving jobs too: the starvation guard's nomination does not hide a job
from reclaim (issue 16).

We test these aspects:
- the guard on (default threshold): ``qa`` holds the whole cluster with pods that never
  finish and may not be reclaimed before they ran ten minutes; ``qb`` (equal weight) submits
  a gang that waits past the threshold, so the guard nominates nodes for it; once ``qa``'s
  pods may be reclaimed, ``qb`` takes its fair share back by reclaim and its gang starts;
- while reclaim cannot free anything yet, the guard still nominates nodes for the gang and
  says so in the group's reason.
"""

from __future__ import annotations

from berth.scheduler.framework import decisions
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, t

MIN_RUNTIME = 600  # qa's pods may not be reclaimed before this: past the guard's threshold


def qa_holds_the_cluster() -> runs.Run:
    """Two 4-cpu nodes filled by qa's never-ending pods; qb submits a 4-pod gang at once."""
    qa = b.queue("qa")
    qa["spec"]["reclaimMinRuntimeSeconds"] = MIN_RUNTIME
    run = runs.Run(
        b.node("n1", cpu="4", memory="64Gi"),
        b.node("n2", cpu="4", memory="64Gi"),
        qa,
        b.queue("qb"),
        *[cpu_pod(f"qa{i:02d}", queue="qa", created=t(i / 1000)) for i in range(12)],
    )
    run.cycle()
    run.put(*gang("big", 4, queue="qb", created=t(0)))
    return run


def held(run: runs.Run, prefix: str) -> int:
    """Pods whose name starts with ``prefix`` bound to a node now."""
    return sum(1 for name, node in run.nodes_of().items() if name.startswith(prefix) and node)


def test_a_starving_gang_takes_its_fair_share_back_by_reclaim() -> None:
    run = qa_holds_the_cluster()
    assert held(run, "qa") == 8
    outcomes: dict[float, runs.Outcome] = {}
    for _ in range(40):  # 20 minutes, a cycle every 30 seconds
        run.clock.advance(30)
        outcomes[run.clock.now() - t(0)] = run.cycle()
    started = [at for at, o in outcomes.items() if any(n.startswith("big-") for n in o.bound)]
    assert started == [MIN_RUNTIME]  # the first cycle qa's pods may be reclaimed in
    # Until then reclaim could free nothing: the guard nominated nodes for the gang once it
    # had waited past the threshold, and said so.
    waiting = {at: o.group_reasons["big"] for at, o in outcomes.items() if at < MIN_RUNTIME}
    assert not any(r.startswith("starving for ") for at, r in waiting.items() if at < 300)
    assert all(r.startswith("starving for ") for at, r in waiting.items() if at >= 300)
    assert waiting[MIN_RUNTIME - 30].startswith("starving for 570s: holding ")
    # Then reclaim freed qb's fair share: four qa pods evicted, the gang bound whole, and its
    # pods are not nominated as well.
    reclaiming = outcomes[MIN_RUNTIME]
    assert len(reclaiming.evicted) == 4 and all(n.startswith("qa") for n in reclaiming.evicted)
    assert not reclaiming.result.of_kind(decisions.NominatePod)
    assert "big" not in reclaiming.group_reasons
    assert held(run, "big-") == 4
    assert held(run, "qa") == 4
    assert run.cycle().queues["qb"].allocated.get("cpu") == 4_000
