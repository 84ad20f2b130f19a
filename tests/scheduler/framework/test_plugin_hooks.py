"""The generic session hooks that let a plugin package (Reservation) keep its own logic.

We test these aspects:

- ``job_first``: a job a plugin names goes before plain pods and other jobs (without the
  plugin, a plain pod takes the only room first);
- ``evictable``: a pod a plugin refuses is never offered to reclaim or preemption as a victim.
"""

from __future__ import annotations

from berth.scheduler.actions import solvers
from berth.scheduler.framework import interfaces, jobs, sessions
from berth.scheduler.snapshot import pods
from tests.scheduler import builders as b
from tests.scheduler.framework import toys


class FirstJob(interfaces.SessionPlugin):
    """Says the job ``key`` goes first and the pod ``keep`` may never be evicted."""

    name = "FirstJob"

    def __init__(self, key: str = "", keep: str = "") -> None:
        self.key, self.keep = key, keep

    def on_session_open(self, session: sessions.Session) -> None:
        session.hooks.job_first.add(self._first, plugin=self.name)
        session.hooks.evictable.add(self._evictable, plugin=self.name)

    def on_session_close(self, session: sessions.Session) -> None:
        pass

    def _first(self, job: jobs.Job) -> bool:
        return job.key == self.key

    def _evictable(self, pod: pods.PodInfo) -> bool:
        return pod.key != self.keep


def one_cpu_cluster() -> list[b.Obj]:
    return [
        b.node("n1", cpu="1"),
        b.pod("plain", cpu="1", created=1),
        b.pod_group("late", created=2),
        b.pod("late-0", cpu="1", group="late", created=2),
    ]


def test_without_job_first_a_plain_pod_takes_the_room() -> None:
    framework = toys.framework_of(toys.Fit(), FirstJob())
    result = toys.run_allocate(framework, toys.snapshot_of(*one_cpu_cluster()))
    assert result.bindings() == {"default/plain": "n1"}


def test_a_job_a_plugin_puts_first_goes_before_plain_pods() -> None:
    framework = toys.framework_of(toys.Fit(), FirstJob(key="default/late"))
    result = toys.run_allocate(framework, toys.snapshot_of(*one_cpu_cluster()))
    assert result.bindings() == {"default/late-0": "n1"}


def test_a_pod_a_plugin_keeps_is_never_a_victim() -> None:
    objects = [b.node("n1"), b.pod("a", node="n1"), b.pod("b", node="n1")]
    framework = toys.framework_of(toys.Fit(), FirstJob(keep="default/a"))
    session = sessions.open_session(toys.snapshot_of(*objects), framework=framework)
    try:
        assert [p.key for p in solvers.running_pods(session)] == ["default/b"]
    finally:
        sessions.close_session(session)
