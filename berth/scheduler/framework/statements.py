"""``Statement``: a transaction of placements and evictions over a session (KAI's Statement).

Actions change the session only through statements (R10)::

    with session.statement() as stmt:
        for pod in tasks:
            attempt = session.place(pod)
            ...
            stmt.allocate(pod, attempt.row, state=attempt.state)
        if session.hooks.job_ready(job).is_success():
            stmt.commit()
        else:
            stmt.discard()

Each operation changes the session's node table at once (so the next attempt sees it), keeps
the job's bookkeeping, runs the allocate/deallocate event handlers, and remembers how to undo
itself. :meth:`Statement.rollback` undoes back to a :meth:`Statement.checkpoint` in reverse
order, :meth:`Statement.discard` undoes everything, and :meth:`Statement.commit` runs the
binding cycle (PreBind for every placed pod, then Bind, then PostBind) and returns the
decisions: evictions first, then what the binding plugins recorded, then nominations
(:meth:`Statement.withdraw` takes back a nomination an earlier statement committed). A
binding plugin's rejection discards the whole statement, so a gang is never bound in part.
Leaving the ``with`` block without committing discards.
"""

from __future__ import annotations

import typing

from berth.scheduler.framework import cyclestate, decisions, hooks, jobs, reasons, statuses

if typing.TYPE_CHECKING:
    import types

    import numpy as np
    import numpy.typing as npt

    from berth.scheduler.framework import sessions
    from berth.scheduler.snapshot import pods

__all__ = ["Statement", "StatementError"]

_ALLOCATE, _PIPELINE, _EVICT, _WITHDRAW = "allocate", "pipeline", "evict", "withdraw"


class StatementError(RuntimeError):
    """A statement used wrongly (after it finished, evicting a pod that is not placed...)."""


class _Operation:
    __slots__ = ("cause", "job", "kind", "node", "pod", "reason", "row", "state", "vec")

    def __init__(
        self,
        kind: str,
        *,
        pod: pods.PodInfo,
        row: int,
        node: str,
        vec: npt.NDArray[np.int64],
        job: jobs.Job | None,
        state: cyclestate.CycleState | None = None,
        reason: str = "",
        cause: reasons.ReasonCode | None = None,
    ) -> None:
        self.kind = kind
        self.pod = pod
        self.row = row
        self.node = node
        self.vec = vec
        self.job = job
        self.state = state
        self.reason = reason
        self.cause = cause


class Statement:
    """A transaction over a session; see the module docstring."""

    def __init__(self, session: sessions.Session) -> None:
        self._session = session
        self._operations: list[_Operation] = []
        self.finished = False
        """True after :meth:`commit` or :meth:`discard`."""
        self.failure: statuses.Status | None = None
        """Why :meth:`commit` discarded instead (a binding plugin's rejection), if it did."""

    def __enter__(self) -> Statement:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: types.TracebackType | None,
    ) -> None:
        if not self.finished:
            self.discard()

    def __len__(self) -> int:
        return len(self._operations)

    def _check_open(self) -> None:
        if self.finished:
            raise StatementError("the statement already committed or discarded")

    # Operations ------------------------------------------------------------------------------
    def allocate(
        self,
        pod: pods.PodInfo,
        row: int,
        *,
        state: cyclestate.CycleState | None = None,
    ) -> statuses.Status:
        """Tentatively place ``pod`` on ``row``: update the table, run Reserve and Permit.

        Returns ``SUCCESS`` or ``WAIT`` (placed; a waiting pod commits only with its ready
        job), or the rejection of a Reserve or Permit plugin, in which case nothing changed.
        ``state`` is the attempt's CycleState (a fresh one when not given).
        """
        self._check_open()
        session = self._session
        framework = session.framework
        node = session.nodes.names[row]
        state = state if state is not None else cyclestate.CycleState()
        job = session.job_of(pod)
        vec = session.vector(pod)
        session.nodes.assume(row, vec)
        operation = _Operation(
            _ALLOCATE, pod=pod, row=row, node=node, vec=vec, job=job, state=state
        )
        if job is not None:
            job.allocated[pod.key] = node
        status = framework.run_reserve(state, pod, node)
        if status.is_success():
            status = framework.run_permit(state, pod, node)
            if not (status.is_success() or status.is_wait()):
                framework.run_unreserve(state, pod, node)
        if not (status.is_success() or status.is_wait()):
            session.nodes.forget(row, vec)
            if job is not None:
                job.allocated.pop(pod.key, None)
            return status
        self._operations.append(operation)
        session.placements.add(pod, node)
        self._notify(session.hooks.allocated, operation)
        return status

    def pipeline(self, pod: pods.PodInfo, row: int) -> None:
        """Nominate ``pod`` to ``row``, where capacity is freeing up: the table counts it, the
        commit records a :class:`~decisions.NominatePod` (no binding)."""
        self._check_open()
        session = self._session
        node = session.nodes.names[row]
        job = session.job_of(pod)
        vec = session.vector(pod)
        session.nodes.assume(row, vec)
        if job is not None:
            job.pipelined[pod.key] = node
        operation = _Operation(_PIPELINE, pod=pod, row=row, node=node, vec=vec, job=job)
        self._operations.append(operation)
        session.placements.add(pod, node)
        self._notify(session.hooks.allocated, operation)

    def withdraw(self, pod: pods.PodInfo) -> None:
        """Take back the nomination of ``pod`` that an earlier statement of this session
        committed: its node's capacity frees, its job no longer counts it as pipelined, and
        the commit drops its :class:`~decisions.NominatePod` from the session's decisions."""
        self._check_open()
        session = self._session
        job = session.job_of(pod)
        node = job.pipelined.get(pod.key) if job is not None else None
        if job is None or node is None or node not in session.nodes.index:
            raise StatementError(f"pod {pod.key} is not nominated to a known node")
        row = session.nodes.index[node]
        vec = session.vector(pod)
        operation = _Operation(_WITHDRAW, pod=pod, row=row, node=node, vec=vec, job=job)
        # Handlers see the pod still pipelined, as when a pipelining is undone.
        session.placements.remove(pod)
        self._notify(session.hooks.deallocated, operation)
        job.pipelined.pop(pod.key, None)
        session.nodes.forget(row, vec)
        self._operations.append(operation)

    def evict(
        self, pod: pods.PodInfo, *, reason: str, cause: reasons.ReasonCode | None = None
    ) -> None:
        """Evict placed ``pod``: its node's capacity frees at once; the commit records an
        :class:`~decisions.EvictPod` with ``reason`` (and ``cause``: why, as data; None for
        preemption and reclaim)."""
        self._check_open()
        session = self._session
        if pod.node_name is None or pod.node_name not in session.nodes.index:
            raise StatementError(f"pod {pod.key} is not placed on a known node")
        row = session.nodes.index[pod.node_name]
        vec = session.vector(pod)
        session.nodes.forget(row, vec)
        job = session.jobs.get(pod.pod_group) if pod.pod_group is not None else None
        if job is not None:
            job.evicted.add(pod.key)
        operation = _Operation(
            _EVICT,
            pod=pod,
            row=row,
            node=pod.node_name,
            vec=vec,
            job=job,
            reason=reason,
            cause=cause,
        )
        self._operations.append(operation)
        session.placements.remove(pod)
        self._notify(session.hooks.deallocated, operation)

    # Transaction control -----------------------------------------------------------------------
    def checkpoint(self) -> int:
        """A point :meth:`rollback` can return to."""
        self._check_open()
        return len(self._operations)

    def rollback(self, checkpoint: int) -> None:
        """Undo every operation after ``checkpoint``, newest first."""
        self._check_open()
        while len(self._operations) > checkpoint:
            self._undo(self._operations.pop())

    def discard(self) -> None:
        """Undo everything; the statement is finished."""
        self._check_open()
        self.rollback(0)
        self.finished = True

    def commit(self) -> list[decisions.Decision]:
        """Run the binding cycle and return the decisions; the statement is finished.

        If a PreBind or Bind plugin rejects any pod, the whole statement is discarded, the
        pod gets the rejection as its reason, :attr:`failure` says why, and nothing is
        returned.
        """
        self._check_open()
        session = self._session
        framework = session.framework
        recorder = decisions.DecisionRecorder()
        placed = [op for op in self._operations if op.kind == _ALLOCATE]
        for run in (framework.run_pre_bind, framework.run_bind):
            for op in placed:
                assert op.state is not None
                status = run(op.state, op.pod, op.node, recorder=recorder)
                if not status.is_success():
                    self.discard()
                    self.failure = status
                    session.reject_pod(op.pod, reason=status.reason())
                    return []
        for op in placed:
            assert op.state is not None
            framework.run_post_bind(op.state, op.pod, op.node, recorder=recorder)
        out: list[decisions.Decision] = []
        for op in self._operations:
            if op.kind == _EVICT:
                out.append(
                    decisions.EvictPod(
                        namespace=op.pod.namespace,
                        name=op.pod.name,
                        uid=op.pod.uid,
                        node=op.node,
                        reason=op.reason,
                        cause=op.cause,
                    )
                )
        out.extend(recorder.decisions())
        for op in self._operations:
            if op.kind == _PIPELINE:
                if op.pod.key in session.hooks.reserve_pods:
                    continue  # a reserve pod has no status to nominate a node in
                out.append(
                    decisions.NominatePod(
                        namespace=op.pod.namespace, name=op.pod.name, uid=op.pod.uid, node=op.node
                    )
                )
            elif op.kind == _ALLOCATE:
                session.placed[op.pod.key] = op.node
                session.accept(op.pod, job=op.job)
                if op.job is not None:
                    op.job.committed.add(op.pod.key)
        withdrawn = {op.pod.key for op in self._operations if op.kind == _WITHDRAW}
        if withdrawn:
            session.recorder.drop_nominations(withdrawn)
        session.recorder.extend(out)
        self._operations = []
        self.finished = True
        return out

    # Internals -----------------------------------------------------------------------------------
    def _undo(self, op: _Operation) -> None:
        session = self._session
        if op.kind == _EVICT:
            session.nodes.assume(op.row, op.vec)
            if op.job is not None:
                op.job.evicted.discard(op.pod.key)
            session.placements.add(op.pod, op.node)
            self._notify(session.hooks.allocated, op)
            return
        if op.kind == _WITHDRAW:  # nominated again, as stmt.pipeline does it
            session.nodes.assume(op.row, op.vec)
            if op.job is not None:
                op.job.pipelined[op.pod.key] = op.node
            session.placements.add(op.pod, op.node)
            self._notify(session.hooks.allocated, op)
            return
        session.placements.remove(op.pod)
        self._notify(session.hooks.deallocated, op)
        if op.kind == _ALLOCATE:
            assert op.state is not None
            session.framework.run_unreserve(op.state, op.pod, op.node)
            if op.job is not None:
                op.job.allocated.pop(op.pod.key, None)
        elif op.job is not None:
            op.job.pipelined.pop(op.pod.key, None)
        session.nodes.forget(op.row, op.vec)

    @staticmethod
    def _notify(handlers: hooks.Events[[jobs.Event]], op: _Operation) -> None:
        if len(handlers):
            handlers(jobs.Event(pod=op.pod, node=op.node, job=op.job))
