"""``berth run`` and ``berth up`` run on one event loop: Kopf as tasks, no thread of Berth's own.

We test these aspects:

- ``berth run`` (its own entry point, ``berth.cli.run._run``) against the emulator, with both
  embedded Kopf operators on (the admission webhooks', for the queue-access check, and the
  leader's): while the leader schedules a gang and Kopf's handlers write its PodGroup's status,
  the process's threads, sampled all along, are only those it had before (the test runner, the
  emulator standing in for the API server) and the loop's executor for blocking calls
  (``asyncio_N``: the scheduling cycle, DNS) — no Kopf thread, no operator thread — while
  both Kopf operators' tasks are tasks of the test's own loop; SIGTERM stops it with exit 0;
- ``berth up`` (``berth.cli.up``'s cluster and operator) the same way;
- no module of ``berth/`` hands a coroutine or a callback to another thread's loop
  (``run_coroutine_threadsafe``, ``call_soon_threadsafe``, ``wrap_future``), starts a thread,
  or runs a loop of its own, except the stand-ins for other processes, which say why.
"""

from __future__ import annotations

import ast
import asyncio
import collections
import collections.abc
import os
import pathlib
import re
import signal
import threading
import typing

import pytest

from berth.cli import run as run_command
from berth.cli import up
from berth.emulator import kubelets, testing
from berth.operator import main, settings
from tests.admission import conftest as admission
from tests.kube import conftest
from tests.scheduler import builders as b

pytestmark = pytest.mark.timeout(120)

ROOT = pathlib.Path(__file__).resolve().parents[2]
certs = admission.certs  # the admission tests' throw-away CA and serving certificate

EXECUTOR = re.compile(r"asyncio_\d+")  # the loop's default executor (asyncio.to_thread)
Object = dict[str, typing.Any]


class Threads:
    """Every thread seen while sampling, beyond those there before."""

    def __init__(self) -> None:
        self.before = set(threading.enumerate())
        self.seen: set[threading.Thread] = set()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._sample(), name="thread sampler")

    async def _sample(self) -> None:
        while not self._stop.is_set():
            self.seen.update(threading.enumerate())
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    def new(self) -> list[str]:
        """Names of the threads that appeared, other than the executor's."""
        return sorted(t.name for t in self.seen - self.before if not EXECUTOR.fullmatch(t.name))


def kopf_tasks() -> collections.Counter[str]:
    """Kopf's tasks on this loop, by name (the orchestrator of each operator, its host task)."""
    names = [t.get_name() for t in asyncio.all_tasks()]
    return collections.Counter(
        n for n in names if n == "multidimensional multitasker" or n.startswith("kopf: ")
    )


def gang(name: str, size: int) -> list[tuple[Object, str, str | None]]:
    """A PodGroup and its pods, as (object, plural, namespace) to create."""
    made: list[tuple[Object, str, str | None]] = [
        (b.pod_group(name, min_member=size), "podgroups", "default")
    ]
    for i in range(size):
        pod = conftest.pod(f"{name}-{i}", labels={"scheduling.berth.io/pod-group": name})
        made.append((pod, "pods", "default"))
    return made


async def run_until(
    operator: collections.abc.Coroutine[typing.Any, typing.Any, main.ExitCode],
    done: collections.abc.Callable[[], bool],
    *,
    expect_kopf: int,
) -> tuple[Threads, main.ExitCode]:
    """Run ``operator`` (which stops on SIGTERM) until ``done``, sampling threads all along."""
    threads = Threads()
    threads.start()
    task = asyncio.create_task(operator, name="the operator")
    try:
        await conftest.until(lambda: task.done() or done(), timeout=60)
        assert not task.done(), "the operator stopped early"
        running = kopf_tasks()
        assert running["multidimensional multitasker"] == expect_kopf, running
        os.kill(os.getpid(), signal.SIGTERM)  # the process's handler: a graceful stop
        code = await asyncio.wait_for(task, 60)
    finally:
        await threads.stop()
        if not task.done():
            task.cancel()
    return threads, code


def bound(emulator: testing.RunningEmulator) -> int:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "pods")
    return sum(
        1 for p in emulator.call(api.storage.list, resource.key) if p["spec"].get("nodeName")
    )


def phase(emulator: testing.RunningEmulator, plural: str, name: str) -> str | None:
    api = emulator.api
    resource = emulator.call(api.resource, "scheduling.berth.io/v1alpha1", plural)
    found = emulator.call(api.storage.get, resource.key, "default", name)
    return None if found is None else (found.get("status") or {}).get("phase")


async def test_berth_run_schedules_with_kopf_on_its_loop_and_no_thread_of_its_own(
    emulator: testing.RunningEmulator,
    certs: admission.Certs,
    tmp_path: pathlib.Path,
) -> None:
    conftest.install_crds(emulator)
    conftest.create(emulator, conftest.node("n1"), plural="nodes", namespace=None)
    for obj, plural, namespace in gang("train", 3):
        conftest.create(emulator, obj, plural=plural, namespace=namespace)
    config = settings.Settings(
        kubeconfig=emulator.kubeconfig,
        namespace="default",
        http_host="127.0.0.1",
        http_port=0,
        admission={
            "queue_access": True,  # the webhooks' Kopf runs too
            "webhook_host": "127.0.0.1",
            "webhook_port": 0,
            "cert_file": str(certs.cert_file),
            "key_file": str(certs.key_file),
        },
        leader_election={"identity": "one-loop"},
    )

    def scheduled() -> bool:
        # Bound (no kubelets here) and so written by Kopf's PodGroup status handler.
        return bound(emulator) == 3 and phase(emulator, "podgroups", "train") == "Scheduled"

    threads, code = await run_until(run_command._run(config), scheduled, expect_kopf=2)
    assert code is main.ExitCode.OK
    assert threads.new() == []


async def test_berth_up_schedules_with_kopf_on_its_loop_and_no_thread_of_its_own(
    tmp_path: pathlib.Path,
) -> None:
    pool = kubelets.parse_pool("2x cpu=8,memory=32Gi")
    threads_before_cluster = set(threading.enumerate())
    cluster = up.start_cluster(pools=[pool], speed=1.0, kubeconfig=tmp_path / "kubeconfig")
    try:
        # The embedded API server's thread is the cluster's, not the operator's.
        cluster_threads = {t.name for t in set(threading.enumerate()) - threads_before_cluster}
        assert cluster_threads == {"berth-emulator"}
        emulator = testing.RunningEmulator(cluster.threaded, cluster.kubeconfig, tmp_path)
        for obj, plural, namespace in gang("train", 4):
            conftest.create(emulator, obj, plural=plural, namespace=namespace)

        def scheduled() -> bool:
            placed = phase(emulator, "podgroups", "train") in ("Running", "Finished")
            return bound(emulator) == 4 and placed

        operator = up._up(
            cluster,
            http_port=0,
            log_level="warning",
            mode=settings.Mode.SCHEDULER,
            admission=settings.AdmissionSettings(webhook=False),
        )
        threads, code = await run_until(operator, scheduled, expect_kopf=1)
    finally:
        cluster.stop()
    assert code is main.ExitCode.OK
    assert threads.new() == []


# What may still hand work to another thread's loop, and why: the stand-ins for other processes.
_OTHER_PROCESSES = {
    "berth/emulator/server.py": "the emulator stands in for the API server, a process of its own",
    "berth/emulator/bench.py": "the emulator's benchmark runs the emulator as its own process",
    "berth/chaos/proxy.py": "the fault proxy stands in for the network between two processes",
}
_HANDOFFS = {"run_coroutine_threadsafe", "call_soon_threadsafe", "wrap_future", "new_event_loop"}


def _handoffs(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _HANDOFFS:
            found.append(f"{node.attr} (line {node.lineno})")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "Thread"
            and isinstance(node.value, ast.Name)
            and node.value.id == "threading"
        ):
            found.append(f"threading.Thread (line {node.lineno})")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "asyncio"
        ):
            found.append(f"asyncio.run (line {node.lineno})")
    return found


def test_no_module_hands_work_to_another_loop() -> None:
    offenders = {}
    for path in sorted((ROOT / "berth").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in _OTHER_PROCESSES or relative.startswith("berth/cli/"):
            continue  # the CLI's commands start the process's one loop (asyncio.run)
        found = _handoffs(ast.parse(path.read_text(), filename=relative))
        if found:
            offenders[relative] = found
    assert offenders == {}
    for relative in _OTHER_PROCESSES:
        assert (ROOT / relative).is_file(), relative  # the exceptions are still true


def test_the_cli_starts_one_loop_per_command_and_no_thread() -> None:
    for path in sorted((ROOT / "berth" / "cli").rglob("*.py")):
        found = [
            f for f in _handoffs(ast.parse(path.read_text())) if not f.startswith("asyncio.run ")
        ]
        assert found == [], path.name
