"""Informers (``berth.kube.informers``) feeding a ``ClusterCache`` from the emulator.

We test these aspects:

- the first lists fill the cache and mark ``caches-synced`` ready; later changes arrive by
  watch (a new pending pod, a binding, a deletion) and set the loop's trigger;
- which pods are kept: Berth's in every phase, other schedulers' only while bound and running;
  a running pod's status churn does not wake the scheduler, nor does the echo of a binding
  Berth sent (the cache counted the pod there already), while a binding to another node does;
- an expired watch (410 Gone) relists, and objects deleted meanwhile leave the cache;
- an API server that cannot be reached, refuses the credentials (401) or forbids the list
  (403): a clear reason in the readiness condition, retries with backoff, and recovery once it
  answers again — never an exception out of ``run``; a watch refused once (429) is healthy
  again as soon as the next watch opens, events or not;
- Berth's own kinds are not theirs to watch (the leader's Kopf feeds them: a missing CRD is
  named by it, ``tests/operator/test_embedding.py``); a source expected besides the informers
  holds ``synced`` until it listed;
- (malformed objects from a watch: ``test_watching.py``).
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import pathlib

import pytest
import yaml

from berth.emulator import faults, server, testing
from berth.kube.informers import cluster_informers
from berth.kube.transport import clients
from berth.operator import probing
from berth.scheduler.snapshot import cache as cluster_cache
from tests.kube import conftest

NOW = 1_767_225_600.0


class Running:
    """ClusterInformers running in the test's loop."""

    def __init__(self, connection: clients.AsyncConnection) -> None:
        self.cache = cluster_cache.ClusterCache()
        self.trigger = asyncio.Event()
        self.readiness = probing.Readiness()
        self.informers = cluster_informers.ClusterInformers(
            connection.api,
            cache=self.cache,
            scheduler_names={"berth-scheduler"},
            trigger=self.trigger,
            readiness=self.readiness,
            watch_timeout=30,
        )
        for informer in self.informers.informers:
            informer._backoff = (0.05, 0.2)  # fast retries for tests
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.informers.run(self.stop))

    async def close(self) -> None:
        self.stop.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 10)

    def pods(self) -> dict[str, str | None]:
        snapshot = self.cache.snapshot(NOW)
        return {key: info.node_name for key, info in snapshot.pods.items()}

    def condition(self) -> probing.Condition:
        found = [c for c in self.readiness.report() if c.name == "caches-synced"]
        return found[0] if found else probing.Condition("caches-synced", False, "not reported")


@pytest.fixture
async def running(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Running]:
    informed = Running(connection)
    try:
        yield informed
    finally:
        await informed.close()


async def test_lists_then_follows_changes(
    berth_crds: testing.RunningEmulator, running: Running
) -> None:
    emulator = berth_crds
    conftest.create(emulator, conftest.node("n1"), plural="nodes", namespace=None)
    conftest.create(emulator, conftest.pod("early"), plural="pods")
    running.start()
    await asyncio.wait_for(running.informers.synced.wait(), 10)
    assert running.condition().ready
    assert running.pods() == {"default/early": None}
    assert running.cache.snapshot(NOW).nodes.names == ["n1"]

    running.trigger.clear()
    conftest.create(emulator, conftest.pod("late"), plural="pods")
    await conftest.until(lambda: "default/late" in running.pods())
    assert running.trigger.is_set()

    binding = {"target": {"kind": "Node", "name": "n1"}, "metadata": {"name": "late"}}
    emulator.call(emulator.api.bind, namespace="default", name="late", binding=binding)
    await conftest.until(lambda: running.pods().get("default/late") == "n1")

    pods = emulator.call(emulator.api.resource, "v1", "pods")
    emulator.call(emulator.api.delete, pods, namespace="default", name="early")
    await conftest.until(lambda: "default/early" not in running.pods())


@pytest.mark.parametrize(
    ("scheduler", "node", "kept"),
    [
        ("berth-scheduler", None, True),
        ("berth-scheduler", "n1", True),
        ("default-scheduler", None, False),
        ("default-scheduler", "n1", True),
    ],
    ids=["ours-pending", "ours-bound", "foreign-pending", "foreign-bound"],
)
async def test_keeps_berths_pods_and_foreign_pods_using_nodes(
    berth_crds: testing.RunningEmulator,
    running: Running,
    scheduler: str,
    node: str | None,
    kept: bool,
) -> None:
    conftest.create(berth_crds, conftest.node("n1"), plural="nodes", namespace=None)
    conftest.create(berth_crds, conftest.pod("p", scheduler=scheduler, node=node), plural="pods")
    running.start()
    await asyncio.wait_for(running.informers.synced.wait(), 10)
    assert ("default/p" in running.pods()) is kept


async def test_foreign_pod_leaves_the_cache_when_it_finishes(
    berth_crds: testing.RunningEmulator, running: Running
) -> None:
    emulator = berth_crds
    body = conftest.pod("other", scheduler="default-scheduler", node="n1")
    conftest.create(emulator, body, plural="pods")
    running.start()
    await asyncio.wait_for(running.informers.synced.wait(), 10)
    assert "default/other" in running.pods()
    conftest.set_phase(emulator, "other", "Succeeded")
    await conftest.until(lambda: "default/other" not in running.pods())


async def test_running_pod_status_churn_does_not_wake_the_scheduler(
    berth_crds: testing.RunningEmulator, running: Running
) -> None:
    emulator = berth_crds
    conftest.create(emulator, conftest.pod("busy", node="n1"), plural="pods")
    running.start()
    await asyncio.wait_for(running.informers.synced.wait(), 10)
    running.trigger.clear()
    conftest.set_phase(emulator, "busy", "Running")
    conftest.create(emulator, conftest.pod("marker", scheduler="other"), plural="pods")
    # The pods informer saw both events once the marker's (later) event is through.
    await conftest.until(
        lambda: (
            running.informers.informers[-1]._version
            == str(emulator.call(lambda: emulator.api.storage.resource_version))
        )
    )
    assert not running.trigger.is_set()


async def test_the_echo_of_berths_own_binding_does_not_wake_the_scheduler(
    berth_crds: testing.RunningEmulator, running: Running
) -> None:
    emulator = berth_crds
    for name in ("n1", "n2"):
        conftest.create(emulator, conftest.node(name), plural="nodes", namespace=None)
    conftest.create(emulator, conftest.pod("mine"), plural="pods")
    conftest.create(emulator, conftest.pod("moved"), plural="pods")
    running.start()
    await asyncio.wait_for(running.informers.synced.wait(), 10)
    for key in ("default/mine", "default/moved"):
        running.cache.assume_pod(key, node="n1")  # the binder's bindings in flight
    running.trigger.clear()

    def bind(name: str, node: str) -> None:
        binding = {"target": {"kind": "Node", "name": node}, "metadata": {"name": name}}
        emulator.call(emulator.api.bind, namespace="default", name=name, binding=binding)

    bind("mine", "n1")
    await conftest.until(lambda: running.cache.assumed_node("default/mine") is None)
    assert running.pods()["default/mine"] == "n1"
    assert not running.trigger.is_set()

    bind("moved", "n2")  # someone else placed it elsewhere: news for the next cycle
    await conftest.until(lambda: running.pods().get("default/moved") == "n2")
    assert running.trigger.is_set()


async def test_expired_watch_relists_and_drops_what_vanished(
    berth_crds: testing.RunningEmulator, running: Running
) -> None:
    emulator = berth_crds
    conftest.create(emulator, conftest.pod("gone"), plural="pods")
    conftest.create(emulator, conftest.pod("stays"), plural="pods")
    running.start()
    await asyncio.wait_for(running.informers.synced.wait(), 10)
    await running.close()
    # While nobody watches, a pod goes and the watch's version expires: resuming answers 410.
    pods = emulator.call(emulator.api.resource, "v1", "pods")
    emulator.call(emulator.api.delete, pods, namespace="default", name="gone")
    emulator.faults.add(faults.Fault("GET", "/api/v1/pods", status=410, times=1))
    running.stop = asyncio.Event()
    running.start()
    await conftest.until(lambda: "default/gone" not in running.pods())
    assert "default/stays" in running.pods()
    assert [f.status for _, path, f in emulator.faults.fired if path == "/api/v1/pods"] == [410]


@pytest.mark.parametrize(
    ("status", "words"),
    [(401, "credentials"), (403, "RBAC forbids"), (503, "failed")],
    ids=["expired-credentials", "rbac-denied", "server-error"],
)
async def test_refusals_make_readiness_false_with_a_reason_then_recover(
    berth_crds: testing.RunningEmulator,
    running: Running,
    status: int,
    words: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    berth_crds.faults.add(faults.Fault("GET", "/api/v1/nodes", status=status, times=3))
    running.start()
    await conftest.until(
        lambda: not running.condition().ready and words in running.condition().reason
    )
    assert running.condition().reason.startswith("nodes: ")
    await asyncio.wait_for(running.informers.synced.wait(), 10)
    await conftest.until(lambda: running.condition().ready)
    assert any(words in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


async def test_informers_watch_every_kind_but_berths_own(running: Running) -> None:
    watched = {i.resource.path for i in running.informers.informers}
    assert not [path for path in watched if "scheduling.berth.io" in path]
    assert {"/api/v1/pods", "/api/v1/nodes", "/api/v1/namespaces"} <= watched


async def test_another_source_of_the_cache_holds_the_sync_until_it_listed(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    informed = Running(connection)
    informed.informers.sync.expect("queues")  # Kopf's handlers, say
    informed.start()
    try:
        await asyncio.wait_for(
            asyncio.gather(*(i.synced.wait() for i in informed.informers.informers)), 10
        )
        await asyncio.sleep(0.2)
        assert not informed.informers.synced.is_set()
        assert informed.condition().reason == "waiting for the first list of queues"
        informed.informers.sync.following("queues", "the API server does not serve queues")
        assert informed.condition().reason == "queues: the API server does not serve queues"
        informed.informers.sync.following("queues")
        informed.informers.sync.listed("queues")
        await asyncio.wait_for(informed.informers.synced.wait(), 1)
        assert informed.condition().ready
        await conftest.until(lambda: informed.trigger.is_set())  # the first cycle may run
    finally:
        await informed.close()


async def test_unreachable_api_server_is_retried_without_crashing(
    tmp_path: pathlib.Path, unused_tcp_port: int
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(server.kubeconfig(f"http://127.0.0.1:{unused_tcp_port}")))
    async with clients.connect_async(kubeconfig=str(path)) as connection:
        informed = Running(connection)
        informed.start()
        try:
            await conftest.until(
                lambda: "cannot reach the API server" in informed.condition().reason
            )
            await asyncio.sleep(0.3)  # several retries later it is still trying, not crashed
            assert informed.task is not None and not informed.task.done()
        finally:
            await informed.close()


async def test_one_refused_watch_makes_readiness_false_only_until_the_next_watch_opens(
    berth_crds: testing.RunningEmulator, running: Running
) -> None:
    # API Priority and Fairness answers one watch 429 (at startup, many watches open at
    # once). Nodes change rarely: the next watch may bring no event until its bookmark, a
    # minute later, yet the API server answers again as soon as that watch is open.
    nodes = next(i for i in running.informers.informers if i.resource.name == "nodes")
    nodes._watch_timeout = 1  # the watch ends and opens again at once, into the fault
    running.start()
    await conftest.until(lambda: running.condition().ready)
    berth_crds.faults.add(faults.Fault("GET", "/api/v1/nodes", status=429, times=1))
    await conftest.until(lambda: not running.condition().ready)
    assert "nodes: " in running.condition().reason
    await conftest.until(lambda: running.condition().ready, timeout=10.0)
