"""The generic session hooks that let a plugin package (Reservation) keep its own logic.

We test these aspects:

- ``job_first``: a job a plugin names goes before plain pods and other jobs (without the
  plugin, a plain pod takes the only room first);
- ``evictable``: a pod a plugin refuses is never offered to reclaim or preemption as a victim;
- ``reserve_pods``/``reported_as``: a pod a plugin says stands for capacity is not counted by
  ``Placements`` (other pods' constraints), and its "why pending" is recorded about the object
  the plugin names, never as a pod's; without the plugin it is an ordinary pod;
- ``unsignable``/``labels_in_signature``: a pod a plugin refuses to sign has no equivalence
  class; labels join the class only while a plugin says it reads them.
"""

from __future__ import annotations

from berth.scheduler.framework import decisions, equivalence, interfaces, jobs, sessions
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
        assert [p.key for p in session.running_pods()] == ["default/b"]
    finally:
        sessions.close_session(session)


class ReservePod(interfaces.SessionPlugin):
    """Says the pod ``ghost`` is a reserve pod standing for the object ``ns/thing``, and
    reads pods' labels."""

    name = "ReservePod"

    def on_session_open(self, session: sessions.Session) -> None:
        session.hooks.reserve_pods.add("default/ghost")
        session.hooks.reported_as.add(self._about, plugin=self.name)
        session.hooks.unsignable.add(lambda pod: pod.name == "ghost", plugin=self.name)
        session.hooks.labels_in_signature.add(lambda: True, plugin=self.name)

    def on_session_close(self, session: sessions.Session) -> None:
        pass

    @staticmethod
    def _about(pod: pods.PodInfo) -> tuple[decisions.Subject, str] | None:
        return (decisions.Subject.RESERVATION, "ns/thing") if pod.name == "ghost" else None


def _placed_and_waiting(*plugins: interfaces.Plugin) -> tuple[set[str], list[tuple[str, str]]]:
    objects = [
        b.node("n1", cpu="1"),
        b.pod("ghost", node="n1", cpu="1"),
        b.pod("real", node="n1", cpu="0"),
    ]
    framework = toys.framework_of(toys.Fit(), *plugins)
    session = sessions.open_session(toys.snapshot_of(*objects), framework=framework)
    try:
        placed = set(session.placements.placed())
    finally:
        sessions.close_session(session)
    pending = [b.node("n1", cpu="1"), b.pod("ghost", cpu="2")]
    result = toys.run_allocate(framework, toys.snapshot_of(*pending))
    waiting = [
        (d.subject.value, d.key)
        for d in result.decisions
        if isinstance(d, decisions.Unschedulable) and d.subject is not decisions.Subject.GROUP
    ]
    return placed, waiting


def test_a_reserve_pod_is_seen_by_no_pod_and_waits_as_its_object() -> None:
    placed, waiting = _placed_and_waiting(ReservePod())
    assert placed == {"default/real"}
    assert waiting == [("Reservation", "ns/thing")]


def test_without_the_plugin_the_same_pod_is_an_ordinary_pod() -> None:
    placed, waiting = _placed_and_waiting()
    assert placed == {"default/ghost", "default/real"}
    assert waiting == [("Pod", "default/ghost")]


def test_an_unsignable_pod_has_no_class_and_labels_join_classes() -> None:
    objects = [
        b.node("n1"),
        b.queue("q"),
        *(
            b.pod(n, queue="q", labels={"app": app})
            for n, app in [("ghost", "a"), ("x", "a"), ("y", "b")]
        ),
    ]

    def classes(*plugins: interfaces.Plugin) -> dict[str, object]:
        framework = toys.framework_of(toys.Fit(), *plugins)
        session = sessions.open_session(toys.snapshot_of(*objects), framework=framework)
        try:
            return {
                job.pending[0].name: equivalence.class_of(job, session=session)
                for job in session.jobs.values()
            }
        finally:
            sessions.close_session(session)

    plain, signed = classes(), classes(ReservePod())
    assert plain["ghost"] is not None
    assert plain["x"] == plain["y"]
    assert signed["ghost"] is None
    assert signed["x"] != signed["y"]
