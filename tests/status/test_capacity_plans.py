"""Which capacity requests Berth keeps (``berth.status.capacity_requests``), through whole
default-profile cycles on the simulator.

We test these aspects:
- scheduler mode: a gang short of nodes asks for nothing unless its queue (or a parent) names
  a ProvisioningRequest class; then it asks for all of its members, with that class;
- admission mode (its pods held by the gate): a gang short of nodes always asks;
- work that waits for anything nodes cannot give asks for nothing (a queue at its limit, a gang
  missing members), and a want ends when its gang turns out to wait for its queue instead;
- a want ends once its gang is placed, or its PodGroup is gone;
- a scheduler-mode gang short of nodes without a class is a signal instead (what the autoscaler
  does for it is read from its pods' Events), its clock kept while it waits, ended once it
  waits for its queue or is placed; gated, it asks with a request;
- a Reservation that cannot fit asks for a buffer when it says so (or its queue does); once it
  holds its node the buffer is emptied, and it goes with the reservation;
- names of the objects fit the API's 253 characters, whatever the owner's name;
- what a ProvisioningRequest's and a CapacityBuffer's conditions say, and where a buffer's
  virtual pods fit (by its ``Provisioning`` condition's status and reason, never its words).
"""

from __future__ import annotations

import typing

from berth.api import autoscaling
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import snapshots
from berth.status import capacity_requests as plans
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import gang, queue

Obj = dict[str, typing.Any]
ATOMIC = autoscaling.BEST_EFFORT_ATOMIC_SCALE_UP


def with_provisioning(obj: Obj, class_name: str = ATOMIC) -> Obj:
    obj["spec"]["autoscaling"] = {"provisioningRequest": {"provisioningClassName": class_name}}
    return obj


def cycle(
    run: runs.Run, planner: plans.Planner, *, gated: frozenset[str] = frozenset()
) -> dict[str, plans.Want]:
    outcome = run.cycle()
    snapshot = run.cluster.snapshot()
    return dict(
        planner.cycle(
            snapshot,
            marks=outcome.result.of_kind(decisions.MarkPending),
            gated=gated,
            reservations=[
                d
                for d in outcome.result.of_kind(decisions.Unschedulable)
                if d.subject is decisions.Subject.RESERVATION
            ],
        )
    )


def test_scheduler_mode_asks_only_for_queues_that_name_a_class() -> None:
    plain = runs.Run(b.node("n1", cpu="4"), queue("plain"), *gang("a", 4, queue="plain", cpu="2"))
    assert cycle(plain, plans.Planner()) == {}
    planner = plans.Planner()
    run = runs.Run(
        b.node("n1", cpu="4"),
        with_provisioning(queue("parent")),
        queue("atomic", parent="parent"),
        *gang("b", 4, queue="atomic", cpu="2"),
    )
    wants = cycle(run, planner)
    assert list(wants) == ["PodGroup default/b"]
    (want,) = wants.values()
    assert (want.purpose, want.class_name, want.kinds) == (
        plans.Purpose.QUEUE,
        ATOMIC,
        (plans.Kind.PROVISIONING_REQUEST,),
    )
    assert want.members == tuple(f"default/b-{i}" for i in range(4))


def test_admission_mode_always_asks_and_prefers_a_provisioning_request() -> None:
    planner = plans.Planner()
    run = runs.Run(b.node("n1", cpu="4"), queue("plain"), *gang("a", 4, queue="plain", cpu="2"))
    wants = cycle(run, planner, gated=frozenset(f"default/a-{i}" for i in range(4)))
    (want,) = wants.values()
    assert want.purpose is plans.Purpose.ADMISSION
    assert want.kinds == (plans.Kind.PROVISIONING_REQUEST, plans.Kind.CAPACITY_BUFFER)
    assert want.class_name == ATOMIC


def test_work_that_nodes_cannot_help_asks_for_nothing() -> None:
    planner = plans.Planner()
    run = runs.Run(
        b.node("n1", cpu="4"),
        with_provisioning(queue("q", limit={"cpu": "4"})),
        *gang("over", 4, queue="q", cpu="2"),  # 8 cpu under a limit of 4
        *gang("short", 3, min_member=4, queue="q", cpu="1"),  # a member missing
    )
    assert cycle(run, planner) == {}


def test_a_want_ends_when_the_gang_waits_for_its_queue_or_is_placed() -> None:
    planner = plans.Planner()
    limited = with_provisioning(queue("q", limit={"cpu": "100"}))
    run = runs.Run(b.node("n1", cpu="4"), limited, *gang("g", 4, queue="q", cpu="2"))
    assert list(cycle(run, planner)) == ["PodGroup default/g"]
    # Its queue's limit shrinks below the gang: it now waits for the queue, not for nodes.
    run.put(with_provisioning(queue("q", limit={"cpu": "2"})))
    assert cycle(run, planner) == {}
    # Room under the limit and nodes for all four: asked again, then placed: the want ends.
    run.put(with_provisioning(queue("q", limit={"cpu": "100"})))
    assert list(cycle(run, planner)) == ["PodGroup default/g"]
    run.put(b.node("n2", cpu="8"))
    assert cycle(run, planner) == {}
    assert all(run.nodes_of()[f"g-{i}"] for i in range(4))


def test_a_want_ends_with_its_podgroup() -> None:
    planner = plans.Planner()
    run = runs.Run(
        b.node("n1", cpu="1"), with_provisioning(queue("q")), *gang("g", 2, queue="q", cpu="2")
    )
    assert list(cycle(run, planner)) == ["PodGroup default/g"]
    run.cluster.delete("PodGroup", namespace="default", name="g")
    assert cycle(run, planner) == {}


def test_a_scheduler_mode_gang_without_a_class_is_a_signal_while_it_waits_for_nodes() -> None:
    planner = plans.Planner()
    limited = queue("q", limit={"cpu": "100"})
    run = runs.Run(b.node("n1", cpu="4"), limited, *gang("g", 4, queue="q", cpu="2"))
    assert cycle(run, planner) == {}  # no request: the pods' Unschedulable condition asks
    (signalled,) = planner.signals.values()
    assert list(planner.signals) == ["default/g"]
    assert str(signalled.owner) == "PodGroup default/g"
    assert sorted(signalled.members) == [f"default/g-{i}" for i in range(4)]
    since = signalled.since
    # Still waiting a minute later: the clock keeps running from the first mark.
    run.clock.advance(60)
    cycle(run, planner)
    assert planner.signals["default/g"].since == since
    # It now waits for its queue: no autoscaler is waited on.
    run.put(queue("q", limit={"cpu": "2"}))
    cycle(run, planner)
    assert planner.signals == {}
    # Nodes again, then placed: the signal ends.
    run.put(queue("q", limit={"cpu": "100"}))
    cycle(run, planner)
    assert planner.signals["default/g"].since > since
    run.put(b.node("n2", cpu="8"))
    # Placed; this helper hands the planner a snapshot the session did not read, so the cache
    # cannot say which pods stopped waiting since the last one it saw: noticed at the
    # planner's next look at every signal.
    cycle(run, planner)
    assert list(planner.signals) == ["default/g"]
    run.clock.advance(plans.SIGNALS_SETTLE_EVERY)
    cycle(run, planner)
    assert planner.signals == {}
    # Gated (admission mode) or with a class, the gang asks with a request instead.
    gated = runs.Run(b.node("n1", cpu="4"), queue("p"), *gang("a", 4, queue="p", cpu="2"))
    other = plans.Planner()
    cycle(gated, other, gated=frozenset(f"default/a-{i}" for i in range(4)))
    assert other.signals == {}


class _Kept:
    """The cluster as the sessions' source, keeping the snapshot each read (the one the
    operator hands the planner after the cycle)."""

    def __init__(self, run: runs.Run) -> None:
        self._run = run
        self.last: snapshots.Snapshot | None = None

    def snapshot(self) -> snapshots.Snapshot:
        self.last = self._run.cluster.snapshot()
        return self.last


def test_a_signal_ends_at_the_next_cycle_once_its_gang_is_placed() -> None:
    planner = plans.Planner()
    run = runs.Run(
        b.node("n1", cpu="4"),
        queue("q"),
        *gang("g", 4, queue="q", cpu="2"),
        *gang("big", 2, queue="q", cpu="16"),
        b.pod("solo", cpu="10"),  # a pod of no group: its own signal
    )
    source = _Kept(run)

    def step() -> None:
        result = run.scheduler.run_once(source, run.cluster)
        assert source.last is not None
        planner.cycle(source.last, marks=result.of_kind(decisions.MarkPending), gated=frozenset())

    step()
    assert sorted(planner.signals) == ["default/big", "default/g", "default/solo"]
    run.put(b.node("n2", cpu="8"))
    step()  # g is placed by this cycle; its snapshot still shows it waiting
    assert sorted(planner.signals) == ["default/big", "default/g", "default/solo"]
    # The next snapshot names the pods that stopped waiting since: no need to wait for the
    # planner's look at every signal (the clock has not moved).
    step()
    assert sorted(planner.signals) == ["default/big", "default/solo"]
    run.put(b.node("n3", cpu="12"))
    step()
    step()
    assert list(planner.signals) == ["default/big"]
    assert sorted(planner.signals["default/big"].members) == ["default/big-0", "default/big-1"]
    # Its PodGroup deleted (a group the cache says changed), the other gang's signal ends too.
    run.cluster.delete("PodGroup", namespace="default", name="big")
    step()
    assert planner.signals == {}


def _reservation(name: str, *, buffer: bool, queue_name: str | None = None, cpu: str = "8") -> Obj:
    obj = b.reservation(name, cpu=cpu)
    if buffer:
        obj["spec"]["capacityBuffer"] = True
    if queue_name:
        obj["spec"]["queue"] = queue_name
    return obj


def test_a_reservation_that_cannot_fit_asks_for_a_buffer_when_it_says_so() -> None:
    planner = plans.Planner()
    buffered_queue = queue("buffered")
    buffered_queue["spec"]["autoscaling"] = {"reservationBuffers": True}
    run = runs.Run(
        b.node("n1", cpu="4"),
        buffered_queue,
        _reservation("own", buffer=True),
        _reservation("by-queue", buffer=False, queue_name="buffered"),
        _reservation("silent", buffer=False),
    )
    wants = cycle(run, planner)
    assert sorted(wants) == ["Reservation default/by-queue", "Reservation default/own"]
    assert all(w.purpose is plans.Purpose.RESERVATION and w.active for w in wants.values())
    assert all(w.kinds == (plans.Kind.CAPACITY_BUFFER,) for w in wants.values())
    # A node appears: the reservations land there, and their buffers are emptied.
    run.put(b.node("n2", cpu="32"))
    wants = cycle(run, planner)
    wants = cycle(run, planner)
    assert sorted(wants) == ["Reservation default/by-queue", "Reservation default/own"]
    assert not any(w.active for w in wants.values())
    # The reservation goes: so does its want.
    run.cluster.delete("Reservation", namespace="default", name="own")
    assert sorted(cycle(run, planner)) == ["Reservation default/by-queue"]


def test_object_names_fit_the_api() -> None:
    owner = plans.Owner("PodGroup", "v", "ns", "x" * 253, "uid")
    name = plans.object_name(owner, attempt=12, part="3")
    assert len(name) <= 253 and name.endswith("-12-3") and name.startswith("berth-pg-xxx")
    other = plans.object_name(plans.Owner("PodGroup", "v", "ns", "x" * 252 + "y", "u"), attempt=12)
    assert other != plans.object_name(owner, attempt=12)
    assert plans.object_name(plans.Owner("Pod", "v1", "ns", "web-0", "u"), attempt=1) == (
        "berth-pod-web-0-1"
    )


def _status(*conditions: tuple[str, str, str]) -> Obj:
    return {
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": f"{t} {r}"} for t, s, r in conditions
        ]
    }


def test_what_a_provisioning_request_says() -> None:
    pr = plans.Kind.PROVISIONING_REQUEST
    assert plans.verdict(pr, {}).state is plans.State.UNANSWERED
    accepted = plans.verdict(pr, _status(("Accepted", "True", "Accepted")))
    assert accepted == plans.Verdict(
        plans.State.PENDING, "Accepted=True (Accepted: Accepted Accepted)"
    )
    assert (
        plans.verdict(pr, _status(("Accepted", "True", "A"), ("Provisioned", "True", "P"))).state
        is plans.State.PROVISIONED
    )
    failed = plans.verdict(
        pr, _status(("Provisioned", "False", "P"), ("Failed", "True", "NoNodes"))
    )
    assert failed == plans.Verdict(plans.State.REFUSED, "Failed=True (NoNodes: Failed NoNodes)")
    expired = plans.verdict(pr, _status(("BookingExpired", "True", "Expired")))
    assert expired.state is plans.State.REFUSED


def test_what_a_capacity_buffer_says() -> None:
    cb = plans.Kind.CAPACITY_BUFFER
    assert plans.verdict(cb, {}).state is plans.State.UNANSWERED
    unreadable = plans.verdict(
        cb, _status(("ReadyForProvisioning", "False", "PodTemplateNotFound"))
    )
    assert unreadable.state is plans.State.REFUSED
    launching = plans.verdict(
        cb,
        _status(
            ("ReadyForProvisioning", "True", "Resolved"),
            ("Provisioning", "False", "RequiresNewCapacity"),
        ),
    )
    assert launching == plans.Verdict(
        plans.State.PENDING,
        "Provisioning=False (RequiresNewCapacity: Provisioning RequiresNewCapacity)",
    )
    fits = plans.verdict(cb, _status(("Provisioning", "True", "FitsExistingCapacity")))
    assert fits.state is plans.State.PROVISIONED


def test_where_a_capacity_buffers_virtual_pods_fit() -> None:
    ready = ("ReadyForProvisioning", "True", "Resolved")
    assert plans.fit({}) is plans.Fit.UNKNOWN
    assert plans.fit(_status(ready)) is plans.Fit.UNKNOWN
    assert plans.fit(_status(ready, ("Provisioning", "True", "FitsExistingCapacity"))) is (
        plans.Fit.FITS
    )
    # Karpenter v1.15: the same reason for pods that need a node and pods that fit none.
    short = _status(ready, ("Provisioning", "False", "RequiresNewCapacity"))
    assert plans.fit(short) is plans.Fit.SHORT
    assert plans.fit(_status(ready, ("Provisioning", "False", "Infeasible"))) is (
        plans.Fit.INFEASIBLE
    )
    # About the buffer itself, not where its pods fit.
    for reason in ("NotReadyForProvisioning", "BufferEmpty"):
        assert plans.fit(_status(("Provisioning", "False", reason))) is plans.Fit.UNKNOWN
    assert plans.told(short, "Provisioning") == (
        "Provisioning=False (RequiresNewCapacity: Provisioning RequiresNewCapacity)"
    )
    assert plans.told(short, "Missing") == ""
