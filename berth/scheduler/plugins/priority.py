"""Priority: higher priority first, then older first — for pods, jobs and victims.

- QueueSort (pods that bypass batch logic): Kubernetes' ``PrioritySort``, a pod goes before
  another when its priority (``spec.priority``, else its PriorityClass's value) is higher, or
  equal and it was created earlier.
- Session (Volcano/KAI ``priority``): job order by the group's priority (its PriorityClass,
  else its highest member's), task order by pod priority, both higher first; the session's
  fallback then orders by creation time and UID. Preemption may only take victims of lower
  priority than the preemptor's job.
"""

from __future__ import annotations

from berth.scheduler.framework import handles, interfaces, jobs, registries, sessions
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import pods

__all__ = ["NAME", "Priority", "job_key", "new", "task_key"]

NAME = names.PRIORITY


def job_key(job: jobs.Job, /) -> int:
    """Sort key of a job: higher priority first."""
    return -job.priority


def task_key(pod: pods.PodInfo, /) -> int:
    """Sort key of a pod within its job: higher priority first."""
    return -pod.priority


def may_preempt(job: jobs.Job, victim: pods.PodInfo, /) -> bool:
    """Whether ``job`` may evict ``victim``: only a lower-priority one."""
    return victim.priority < job.priority


class Priority(interfaces.QueueSortPlugin, interfaces.SessionPlugin):
    """QueueSort, session plugin (job and task order, preemptable victims)."""

    name = NAME

    def less(self, a: pods.PodInfo, b: pods.PodInfo) -> bool:
        if a.priority != b.priority:
            return a.priority > b.priority
        return a.creation_timestamp < b.creation_timestamp

    def on_session_open(self, session: sessions.Session) -> None:
        session.hooks.job_order.add_key(job_key, plugin=NAME)
        session.hooks.task_order.add_key(task_key, plugin=NAME)
        session.hooks.preemptable.add(may_preempt, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        """Nothing to drop: the callbacks live and die with the session."""


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> Priority:
    """Build the plugin (it takes no arguments)."""
    return Priority()
