"""Statements: tentative placements and evictions, rollback, discard, commit.

We test these aspects:
- allocate changes the node table and the job's bookkeeping at once; rollback to a checkpoint
  and discard restore the table exactly, in reverse order, running Unreserve;
- commit runs PreBind then Bind for every placed pod and returns the decisions (evictions
  first, then bindings, then nominations); the statement is then finished;
- a PreBind rejection discards the whole statement (no partial gang) and explains why;
- a Reserve rejection undoes the placement at once; Permit WAIT keeps it, a Permit rejection
  undoes it;
- the context manager discards when the block raises or ends without a commit;
- evict frees capacity (undone by rollback); pipeline nominates; withdraw takes back a
  nomination an earlier statement committed (undone by discard; its commit drops the
  nomination from the session's decisions) and refuses a pod that is not nominated;
- allocate/deallocate event handlers see every change, in order.
"""

from __future__ import annotations

import numpy as np
import pytest

from berth.scheduler.framework import decisions, jobs, sessions, statements, statuses
from berth.scheduler.snapshot import pods
from tests.scheduler import builders as b
from tests.scheduler.framework import toys


def open_with(*plugins: object, objects: list[b.Obj]) -> sessions.Session:
    framework = toys.framework_of(*plugins)  # type: ignore[arg-type]
    return sessions.open_session(toys.snapshot_of(*objects), framework=framework)


def cluster() -> list[b.Obj]:
    return [
        b.node("n1", cpu="4"),
        b.node("n2", cpu="4"),
        b.pod("running", node="n2", cpu="1", group="old"),
        b.pod_group("old", min_member=1),
        *b.gang("g", 3, cpu="1"),
    ]


def pending(session: sessions.Session, name: str) -> pods.PodInfo:
    return next(p for p in session.snapshot.pending if p.name == name)


def test_rollback_and_discard_restore_the_node_table_exactly() -> None:
    journal = toys.Journal()
    session = open_with(journal, toys.Binder(), objects=cluster())
    initial = session.nodes.requested.copy()
    job = session.jobs["default/g"]
    stmt = session.statement()
    assert stmt.allocate(pending(session, "g-0"), 0).is_success()
    after_first = session.nodes.requested.copy()
    checkpoint = stmt.checkpoint()
    stmt.allocate(pending(session, "g-1"), 0)
    stmt.allocate(pending(session, "g-2"), 1)
    assert job.allocated == {"default/g-0": "n1", "default/g-1": "n1", "default/g-2": "n2"}
    assert job.occupied() == 3
    cpu = session.nodes.column["cpu"]
    assert session.nodes.requested[:, cpu].tolist() == [2000, 2000]

    stmt.rollback(checkpoint)
    np.testing.assert_array_equal(session.nodes.requested, after_first)
    assert list(job.allocated) == ["default/g-0"]
    assert journal.calls[-2:] == ["unreserve g-2 n2", "unreserve g-1 n1"]  # newest first

    stmt.discard()
    np.testing.assert_array_equal(session.nodes.requested, initial)
    assert job.allocated == {}
    assert stmt.finished
    with pytest.raises(statements.StatementError):
        stmt.allocate(pending(session, "g-0"), 0)


def test_commit_returns_decisions_and_updates_the_session() -> None:
    journal = toys.Journal()
    session = open_with(journal, toys.Binder(), objects=cluster())
    running = session.snapshot.pods["default/running"]
    with session.statement() as stmt:
        stmt.evict(running, reason="make room")
        stmt.allocate(pending(session, "g-0"), 1)
        stmt.pipeline(pending(session, "g-1"), 0)
        out = stmt.commit()
    assert out == [
        decisions.EvictPod(
            namespace="default",
            name="running",
            uid="uid-default-running",
            node="n2",
            reason="make room",
        ),
        decisions.BindPod(namespace="default", name="g-0", uid="uid-default-g-0", node="n2"),
        decisions.NominatePod(namespace="default", name="g-1", uid="uid-default-g-1", node="n1"),
    ]
    assert session.recorder.decisions() == tuple(out)
    assert session.placed == {"default/g-0": "n2"}
    assert session.jobs["default/g"].committed == {"default/g-0"}
    assert journal.calls == ["reserve g-0 n2", "permit g-0 n2", "pre_bind g-0 n2"]
    assert stmt.finished


def test_a_pre_bind_rejection_discards_the_whole_statement() -> None:
    journal = toys.Journal(reject_pre_bind="g-1")
    session = open_with(journal, toys.Binder(), objects=cluster())
    initial = session.nodes.requested.copy()
    stmt = session.statement()
    for name in ("g-0", "g-1", "g-2"):
        stmt.allocate(pending(session, name), 0)
    assert stmt.commit() == []
    assert stmt.failure == statuses.Status(
        code=statuses.Code.UNSCHEDULABLE, reasons=("volume not ready",), plugin="Journal"
    )
    np.testing.assert_array_equal(session.nodes.requested, initial)
    assert session.pod_reasons == {"default/g-1": "volume not ready"}
    assert session.recorder.decisions() == ()


def test_a_reserve_rejection_undoes_the_placement_at_once() -> None:
    journal = toys.Journal(reject_reserve="g-0")
    session = open_with(journal, objects=cluster())
    initial = session.nodes.requested.copy()
    with session.statement() as stmt:
        status = stmt.allocate(pending(session, "g-0"), 0)
        assert status == statuses.Status(
            code=statuses.Code.UNSCHEDULABLE, reasons=("journal says no",), plugin="Journal"
        )
        assert len(stmt) == 0
    np.testing.assert_array_equal(session.nodes.requested, initial)
    assert journal.calls == ["reserve g-0 n1", "unreserve g-0 n1"]
    assert session.jobs["default/g"].allocated == {}


@pytest.mark.parametrize(
    ("permit", "kept"),
    [
        (statuses.Code.SUCCESS, True),
        (statuses.Code.WAIT, True),
        (statuses.Code.UNSCHEDULABLE, False),
        (statuses.Code.ERROR, False),
    ],
    ids=["success", "wait-keeps", "rejection-undoes", "error-undoes"],
)
def test_permit_outcomes(permit: statuses.Code, kept: bool) -> None:
    journal = toys.Journal(permit=permit)
    session = open_with(journal, objects=cluster())
    with session.statement() as stmt:
        status = stmt.allocate(pending(session, "g-0"), 0)
        assert status.code is permit
        assert len(stmt) == (1 if kept else 0)
        assert (journal.calls[-1] == "unreserve g-0 n1") is not kept


def test_the_context_manager_discards_on_exception_and_without_commit() -> None:
    session = open_with(toys.Binder(), objects=cluster())
    initial = session.nodes.requested.copy()
    with pytest.raises(RuntimeError, match="action bug"), session.statement() as stmt:
        stmt.allocate(pending(session, "g-0"), 0)
        raise RuntimeError("action bug")
    assert stmt.finished
    np.testing.assert_array_equal(session.nodes.requested, initial)
    with session.statement() as forgotten:
        forgotten.allocate(pending(session, "g-1"), 0)
    assert forgotten.finished
    np.testing.assert_array_equal(session.nodes.requested, initial)


def test_evict_frees_capacity_and_rollback_restores_it() -> None:
    session = open_with(objects=cluster())
    running = session.snapshot.pods["default/running"]
    cpu = session.nodes.column["cpu"]
    with session.statement() as stmt:
        stmt.evict(running, reason="r")
        assert session.nodes.requested[1, cpu] == 0
        assert session.jobs.get("default/old") is None  # not pending: no job to count
        stmt.discard()
    assert session.nodes.requested[1, cpu] == 1000
    with pytest.raises(statements.StatementError, match="is not placed"):
        session.statement().evict(pending(session, "g-0"), reason="r")


def test_event_handlers_see_every_change_in_order() -> None:
    session = open_with(objects=cluster())
    seen: list[str] = []

    def allocated(event: jobs.Event) -> None:
        seen.append(f"+{event.pod.name}@{event.node} job={event.job.key if event.job else None}")

    def deallocated(event: jobs.Event) -> None:
        seen.append(f"-{event.pod.name}@{event.node}")

    session.hooks.allocated.add(allocated, plugin="Watcher")
    session.hooks.deallocated.add(deallocated, plugin="Watcher")
    with session.statement() as stmt:
        stmt.allocate(pending(session, "g-0"), 0)
        stmt.pipeline(pending(session, "g-1"), 1)
        stmt.evict(session.snapshot.pods["default/running"], reason="r")
        stmt.discard()
    assert seen == [
        "+g-0@n1 job=default/g",
        "+g-1@n2 job=default/g",
        "-running@n2",
        "+running@n2 job=None",
        "-g-1@n2",
        "-g-0@n1",
    ]


def test_withdraw_takes_back_a_committed_nomination() -> None:
    session = open_with(toys.Binder(), objects=cluster())
    job = session.jobs["default/g"]
    initial = session.nodes.requested.copy()
    g1, g2 = pending(session, "g-1"), pending(session, "g-2")
    with session.statement() as stmt:
        stmt.pipeline(g1, 0)
        stmt.pipeline(g2, 0)
        stmt.commit()
    nominated = session.nodes.requested.copy()
    with session.statement() as stmt:
        stmt.withdraw(g1)
        assert job.pipelined == {"default/g-2": "n1"}
        assert session.nodes.requested[0].sum() < nominated[0].sum()
        stmt.discard()  # nominated again, exactly as before
    assert job.pipelined == {"default/g-1": "n1", "default/g-2": "n1"}
    assert np.array_equal(session.nodes.requested, nominated)
    with session.statement() as stmt:
        stmt.withdraw(g1)
        stmt.withdraw(g2)
        assert stmt.commit() == []
    assert job.pipelined == {}
    assert np.array_equal(session.nodes.requested, initial)
    assert not any(isinstance(d, decisions.NominatePod) for d in session.recorder.decisions())
    with session.statement() as stmt, pytest.raises(statements.StatementError, match="g-1"):
        stmt.withdraw(g1)
