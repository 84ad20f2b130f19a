"""Sessions: opening (jobs, plain pods, reasons), the handle, session plugins, closing.

We test these aspects:
- pending pods are sorted into jobs (PodGroups and the implicit group of one) and plain pods;
- gated pods and pods naming a PodGroup that does not exist get reasons at once;
- the handle serves the session's snapshot, time and recorder only while the session is open;
- through the handle a plugin asks where the framework would place a pod on a node table of its
  own (nothing reserved), only while a session is open;
- a job is too big for any node when fewer of its pods than its quorum still needs fit the
  largest allocatable (what no eviction can change);
- session plugins are opened and closed in profile order; one raising does not stop the
  others and is reported;
- closing gives every pending pod not placed a reason and records Unschedulable decisions
  sorted by key; a session closes once.
"""

from __future__ import annotations

import pytest

from berth.scheduler.framework import decisions, errors, handles, interfaces, reasons, sessions
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.framework import toys


def objects() -> list[b.Obj]:
    return [
        b.node("n1"),
        *b.gang("train", 2),
        b.pod("solo", queue="research"),
        b.pod("web-1"),
        b.pod("web-0"),
        b.pod("gated", gates=["example.com/wait"]),
        b.pod("orphan", group="missing"),
    ]


def test_open_session_builds_jobs_and_plain_pods() -> None:
    session = sessions.open_session(toys.snapshot_of(*objects()), framework=toys.framework_of())
    assert sorted(session.jobs) == ["default/pod:solo", "default/train"]
    assert [p.name for p in session.jobs["default/train"].pending] == ["train-0", "train-1"]
    solo = session.jobs["default/pod:solo"]
    assert solo.group.implicit and solo.queue == "research"
    assert [p.name for p in session.plain] == ["web-0", "web-1"]
    assert session.job_of(session.jobs["default/train"].pending[0]) is session.jobs["default/train"]
    assert session.pod_reasons == {
        "default/gated": "waiting for scheduling gates to be removed: example.com/wait",
        "default/orphan": "waiting for PodGroup default/missing to exist",
    }


def test_the_handle_serves_session_data_only_while_open() -> None:
    handle = handles.ExtendedHandle(clock=clocks.VirtualClock(5.0))
    framework = toys.framework_of(handle=handle)
    snapshot = toys.snapshot_of(*objects())
    assert not handle.in_session
    assert handle.now() == 5.0
    with pytest.raises(errors.NoSessionError):
        handle.snapshot()
    session = sessions.open_session(snapshot, framework=framework)
    assert handle.snapshot() is snapshot
    assert handle.now() == b.EPOCH
    assert handle.recorder() is session.recorder
    assert handle.snapshot().reservations == {}
    sessions.close_session(session)
    with pytest.raises(errors.NoSessionError):
        handle.recorder()


def test_the_handle_finds_a_node_on_the_plugins_table_while_a_session_is_open() -> None:
    handle = handles.ExtendedHandle(clock=clocks.VirtualClock(5.0))
    framework = toys.framework_of(toys.Fit(), handle=handle)
    snapshot = toys.snapshot_of(b.node("n1", cpu="2"), b.node("n2", cpu="2"), b.pod("big", cpu="2"))
    session = sessions.open_session(snapshot, framework=framework)
    (pod,) = session.plain
    mine = session.nodes.copy()
    first = handle.find_node(pod, nodes=mine)
    assert first.row is not None
    # The plugin fills that node on its own table: the framework places the pod elsewhere...
    mine.assume(first.row, mine.vector(pod.requests))
    second = handle.find_node(pod, nodes=mine)
    assert second.row is not None and second.row != first.row
    mine.assume(second.row, mine.vector(pod.requests))
    # ... and says why not when its table has no room left.
    assert handle.find_node(pod, nodes=mine, explain=False).row is None
    # Nothing was reserved on the session's own table.
    assert handle.find_node(pod, nodes=session.nodes).row == first.row
    sessions.close_session(session)
    with pytest.raises(errors.NoSessionError):
        handle.find_node(pod, nodes=mine)


def test_a_job_is_too_big_for_any_node_when_too_few_of_its_pods_fit_an_empty_one() -> None:
    big_pod = b.pod("wide-2", cpu="9", group="wide")
    snapshot = toys.snapshot_of(
        b.node("n1", cpu="4"),
        b.node("n2", cpu="8"),
        *b.gang("wide", 2, min_member=2, cpu="8"),  # each fits n2 alone
        big_pod,  # no node has 9 CPUs
        *b.gang("huge", 2, min_member=1, cpu="16"),
    )
    session = sessions.open_session(snapshot, framework=toys.framework_of())
    wide, huge = session.jobs["default/wide"], session.jobs["default/huge"]
    # Two of wide's three pods fit an emptied n2 (not both at once: a trial placement
    # finds that), and its quorum is two: eviction might help.
    assert not session.too_big_for_any_node(wide)
    assert session.too_big_for_any_node(huge)


class Tracer(interfaces.SessionPlugin):
    def __init__(self, name: str, log: list[str], *, fail: str = "") -> None:
        self.name = name
        self.log = log
        self.fail = fail

    def on_session_open(self, session: sessions.Session) -> None:
        self.log.append(f"open {self.name}")
        if self.fail == "open":
            raise RuntimeError("cannot open")

    def on_session_close(self, session: sessions.Session) -> None:
        self.log.append(f"close {self.name}")
        if self.fail == "close":
            raise RuntimeError("cannot close")


def test_session_plugins_open_and_close_in_order_despite_failures() -> None:
    log: list[str] = []
    framework = toys.framework_of(
        Tracer("A", log, fail="open"), Tracer("B", log), Tracer("C", log, fail="close")
    )
    session = sessions.open_session(toys.snapshot_of(b.node("n1")), framework=framework)
    result = sessions.close_session(session)
    assert log == ["open A", "open B", "open C", "close A", "close B", "close C"]
    assert result.errors == (
        "plugin A raised RuntimeError: cannot open",
        "plugin C raised RuntimeError: cannot close",
    )
    assert set(result.plugin_seconds) == {"A", "B", "C"}


def test_close_session_records_reasons_as_sorted_decisions() -> None:
    session = sessions.open_session(toys.snapshot_of(*objects()), framework=toys.framework_of())
    gang = reasons.new(reasons.ReasonCode.UNSCHEDULABLE, "gang needs minMember 2")
    session.reject_job(session.jobs["default/train"], reason=gang)
    result = sessions.close_session(session)
    unschedulable = result.of_kind(decisions.Unschedulable)
    assert unschedulable[0] == decisions.Unschedulable(
        subject=decisions.Subject.GROUP, key="default/train", reason=gang
    )
    assert [(d.subject.value, d.key) for d in unschedulable[1:]] == [
        ("Pod", "default/gated"),
        ("Pod", "default/orphan"),
        ("Pod", "default/solo"),
        ("Pod", "default/train-0"),
        ("Pod", "default/train-1"),
        ("Pod", "default/web-0"),
        ("Pod", "default/web-1"),
    ]
    assert (
        result.pod_reasons["default/train-0"] == "pod group default/train: gang needs minMember 2"
    )
    assert result.pod_reasons["default/web-0"] == "not tried this cycle"
    assert result.group_reasons == {"default/train": "gang needs minMember 2"}
    with pytest.raises(RuntimeError, match="already closed"):
        sessions.close_session(session)


def test_pod_reasons_derived_from_the_group_follow_its_latest_reason() -> None:
    session = sessions.open_session(toys.snapshot_of(*objects()), framework=toys.framework_of())
    job = session.jobs["default/train"]
    code = reasons.ReasonCode
    session.reject_pod(
        job.pending[1], reason=reasons.new(code.UNSCHEDULABLE, "0/1 nodes fit: 1 Insufficient cpu")
    )
    session.reject_job(job, reason=reasons.new(code.UNSCHEDULABLE, "first"))
    session.reject_job(
        job, reason=reasons.new(code.GANG_TIMED_OUT, "schedule timeout of 60s exceeded: first")
    )
    assert session.pod_reasons["default/train-0"] == (
        "pod group default/train: schedule timeout of 60s exceeded: first"
    )
    assert session.pod_reasons["default/train-1"] == "0/1 nodes fit: 1 Insufficient cpu"
