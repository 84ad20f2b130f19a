"""Which tasks belong to which part of the process, and stopping a task within a bound.

Time here is the event loop's (``asyncio`` sleeps and timeouts), never the wall clock, so that
tests run these helpers under ``looptime`` in virtual seconds. Waiting and waking are
:mod:`berth.util.wakeups`'.

:class:`TaskScope` says which tasks were started inside a part of the program (a task and every
task created from it, transitively): the embedded Kopf operators run on the operator's loop and,
when they stop, cancel the tasks they started and none of the others
(:mod:`berth.operator.embedding`).
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import contextvars
import logging
import typing
import weakref

__all__ = ["TaskScope", "cancel_and_wait", "end_within"]

_T = typing.TypeVar("_T")

logger = logging.getLogger(__name__)


async def cancel_and_wait(task: asyncio.Task[object], *, timeout: float) -> bool:
    """Cancel ``task`` and wait up to ``timeout`` seconds for it to end; True if it ended.

    The task's own exception (other than the cancellation) is logged, not raised: the caller
    is shutting it down and has nothing better to do with it.
    """
    if not task.done():
        task.cancel()
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        logger.error("task %s did not stop within %ss of being cancelled", task.get_name(), timeout)
        return False
    if not task.cancelled() and task.exception() is not None:
        logger.error("task %s failed while stopping", task.get_name(), exc_info=task.exception())
    return True


async def end_within(
    tasks: collections.abc.Iterable[asyncio.Task[typing.Any]],
    /,
    *,
    timeout: float,
    late: collections.abc.Callable[[asyncio.Task[typing.Any]], None],
) -> None:
    """Give ``tasks``, already asked to stop (their stop flag set), ``timeout`` seconds to end;
    then cancel each one still running (``late`` is told first, to say so) and wait up to
    ``timeout`` more for it (:func:`cancel_and_wait`)."""
    pending = {task for task in tasks if not task.done()}
    if not pending:
        return
    _, still = await asyncio.wait(pending, timeout=timeout)
    for task in sorted(still, key=lambda t: t.get_name()):
        late(task)
        await cancel_and_wait(task, timeout=timeout)


class TaskScope:
    """The tasks started inside :meth:`entered` (on any loop), and every task they start.

    asyncio copies the creating context into each task it creates; a context variable marks the
    scope, and a task factory installed on the loop while any scope is entered there records
    each new task created in a marked context (Python 3.11 gives no way to read a task's context
    from outside it; 3.12's ``Task.get_context`` would). Tasks are held weakly: a finished task
    leaves the scope when it is collected.

    :meth:`outside` is the complement, live: every task of the running loop not in the scope,
    which is what ``kopf.run_tasks(..., ignored=...)`` must leave alone.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: weakref.WeakSet[asyncio.Future[typing.Any]] = weakref.WeakSet()

    def __contains__(self, task: object) -> bool:
        return task in self._tasks

    def tasks(self) -> list[asyncio.Task[typing.Any]]:
        """The scope's tasks not done yet."""
        return [t for t in list(self._tasks) if isinstance(t, asyncio.Task) and not t.done()]

    def outside(self) -> _Outside:
        """Every task of the running loop that is not in this scope, as a live collection."""
        return _Outside(self)

    @contextlib.contextmanager
    def entered(self) -> collections.abc.Iterator[None]:
        """Mark the current context (the calling task's own) as this scope for the block: the
        tasks created from it, and from them, are the scope's."""
        loop = asyncio.get_running_loop()
        current = asyncio.current_task()
        if current is not None:
            self._tasks.add(current)
        _Recorder.attach(loop)
        token = _SCOPE.set(self)
        try:
            yield
        finally:
            _SCOPE.reset(token)
            _Recorder.detach(loop)


_SCOPE: contextvars.ContextVar[TaskScope | None] = contextvars.ContextVar(
    "berth_task_scope", default=None
)


class _Outside(collections.abc.Collection[asyncio.Task[typing.Any]]):
    """The running loop's tasks outside one scope (see :meth:`TaskScope.outside`)."""

    def __init__(self, scope: TaskScope) -> None:
        self._scope = scope

    def __contains__(self, task: object) -> bool:
        return task not in self._scope

    def __iter__(self) -> collections.abc.Iterator[asyncio.Task[typing.Any]]:
        return iter([t for t in asyncio.all_tasks() if t not in self._scope])

    def __len__(self) -> int:
        return sum(1 for t in asyncio.all_tasks() if t not in self._scope)


class _Recorder:
    """The task factory recording tasks into the scope of the context that creates them; one
    per loop, chained to the factory the loop had, removed when the last scope leaves."""

    _attached: typing.ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Recorder]]

    def __init__(self, previous: typing.Any) -> None:
        self.previous = previous
        self.users = 0

    @classmethod
    def attach(cls, loop: asyncio.AbstractEventLoop) -> None:
        recorder = cls._attached.get(loop)
        if recorder is None:
            recorder = cls(loop.get_task_factory())
            cls._attached[loop] = recorder
            loop.set_task_factory(recorder)
        recorder.users += 1

    @classmethod
    def detach(cls, loop: asyncio.AbstractEventLoop) -> None:
        recorder = cls._attached.get(loop)
        if recorder is None:
            return
        recorder.users -= 1
        if recorder.users <= 0:
            del cls._attached[loop]
            if loop.get_task_factory() == recorder:
                loop.set_task_factory(recorder.previous)

    def __call__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: collections.abc.Generator[typing.Any, None, _T]
        | collections.abc.Coroutine[typing.Any, typing.Any, _T],
        /,
        **options: typing.Any,
    ) -> asyncio.Future[_T]:
        task: asyncio.Future[_T]
        if self.previous is not None:
            task = self.previous(loop, coro, **options)
        else:
            task = asyncio.Task(coro, loop=loop, **options)
        context: contextvars.Context | None = options.get("context")
        scope = context.get(_SCOPE) if context is not None else _SCOPE.get()
        if scope is not None:
            scope._tasks.add(task)
        return task


_Recorder._attached = weakref.WeakKeyDictionary()
