"""The SIGSTOP experiment: a paused leader must never write after its successor has started.

One run, against any kubeconfig whose API server writes an audit log this machine can read:

1. start replica A (``berth run``, short lease timings), wait until it holds the Lease; start
   replica B and wait until it follows;
2. create half of the pods in the experiment's namespace; once A has bound them, **SIGSTOP**
   A and create the other half;
3. wait (from the audit log) until B has taken the Lease and bound pods, let it fill the
   nodes for ``hold`` seconds, then **SIGCONT** A — which resumes with its watches delivering
   the new pods onto a cache that has not seen B's bindings, and its binder workers, status
   writers and scheduling loop free to act on them;
4. wait until A has exited (it lost the Lease) and every pod is bound, or a timeout.

Counted at the API server: A's successful writes after B's first write (must be 0), A's write
attempts after that (refused ones included, for information), and pods ``Failed`` (a pod bound
on stale data onto a node the successor had filled is failed ``OutOf<resource>`` by the
kubelet; must be 0). The replicas tell themselves apart by their user agent, ``berth/<identity>``.

:func:`run_many` repeats it; :class:`Summary` is what ``berth chaos sigstop`` prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import time
import typing

from berth.chaos import audits
from berth.kube import clients, errors, rest

__all__ = ["Experiment", "RunResult", "Summary", "run_many", "run_once"]

_Api = clients.AsyncApiClient


@dataclasses.dataclass(frozen=True)
class Experiment:
    """What to run against (see the module docstring)."""

    kubeconfig: pathlib.Path
    audit_log: pathlib.Path
    workdir: pathlib.Path  # replicas' logs
    namespace: str = "berth-chaos"  # where the burst's pods go
    lease_namespace: str = "default"  # where the replicas keep their Lease
    lease_duration: float = 4.0
    renew_deadline: float = 3.0
    retry_period: float = 0.5
    pods: int = 200
    cpu: str = "1"
    hold: float = 1.0  # seconds the successor fills the nodes before the old leader resumes
    timeout: float = 60.0  # per phase
    scheduler_name: str = "berth-scheduler"
    extra_env: typing.Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One run, as counted at the API server."""

    run: int
    old_leader: str
    new_leader: str
    paused_seconds: float
    late_writes: int  # the old leader's successful writes after the new leader's first write
    late_attempts: int  # the old leader's write requests answered after that, refused or not
    new_leader_writes: int
    bound: int
    failed_pods: int
    old_leader_exit: int | None


@dataclasses.dataclass(frozen=True)
class Summary:
    runs: list[RunResult]

    def as_dict(self) -> dict[str, typing.Any]:
        return {
            "runs": len(self.runs),
            "late_writes": sum(r.late_writes for r in self.runs),
            "late_attempts": sum(r.late_attempts for r in self.runs),
            "failed_pods": sum(r.failed_pods for r in self.runs),
            "detail": [dataclasses.asdict(r) for r in self.runs],
        }


class Replica:
    """One ``berth run`` process with its own identity, log file and user agent."""

    def __init__(self, experiment: Experiment, identity: str) -> None:
        self.identity = identity
        self.log = experiment.workdir / f"{identity}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
        env |= {
            "BERTH_KUBECONFIG": str(experiment.kubeconfig),
            "BERTH_NAMESPACE": experiment.lease_namespace,
            "BERTH_HTTP_HOST": "127.0.0.1",
            "BERTH_HTTP_PORT": "0",
            "BERTH_SHUTDOWN_TIMEOUT": "3",
            "BERTH_SCHEDULER_NAME": experiment.scheduler_name,
            "BERTH_LEADER_ELECTION__IDENTITY": identity,
            "BERTH_LEADER_ELECTION__LEASE_DURATION": str(experiment.lease_duration),
            "BERTH_LEADER_ELECTION__RENEW_DEADLINE": str(experiment.renew_deadline),
            "BERTH_LEADER_ELECTION__RETRY_PERIOD": str(experiment.retry_period),
            **experiment.extra_env,
        }
        self._out = self.log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from berth.cli.main import main; main()", "run"],
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def user_agent(self) -> str:
        return f"berth/{self.identity}"

    def logged(self, text: str) -> bool:
        return text in self.log.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def stop(self, *, timeout: float = 15.0) -> int | None:
        """SIGCONT (in case), SIGTERM, wait; SIGKILL if it does not go. The exit status."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._out.close()
        return code


async def _until(
    predicate: typing.Callable[[], typing.Awaitable[bool]], *, timeout: float, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.05)


async def _holder(api: _Api, experiment: Experiment) -> str | None:
    path = (
        f"/apis/coordination.k8s.io/v1/namespaces/{experiment.lease_namespace}"
        "/leases/berth-scheduler"
    )
    try:
        lease = await rest.request(api, method="GET", path=path, timeout=10)
    except errors.NotFound:
        return None
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _pods(api: _Api, namespace: str) -> list[rest.Body]:
    listed = await rest.request(
        api, method="GET", path=f"/api/v1/namespaces/{namespace}/pods", timeout=30
    )
    return list(listed.get("items") or [])


def _pod(name: str, experiment: Experiment) -> rest.Body:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "berth-chaos"}},
        "spec": {
            "schedulerName": experiment.scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": experiment.cpu}},
                }
            ],
        },
    }


async def _create_pods(
    api: _Api, experiment: Experiment, *, prefix: str, start: int, end: int
) -> None:
    path = f"/api/v1/namespaces/{experiment.namespace}/pods"
    for first in range(start, end, 20):
        batch = range(first, min(end, first + 20))
        await asyncio.gather(
            *(
                rest.request(
                    api, method="POST", path=path, body=_pod(f"{prefix}-{i:05d}", experiment)
                )
                for i in batch
            )
        )


async def _clean(api: _Api, experiment: Experiment) -> None:
    """Delete the experiment's pods (each at once: no grace) and wait until they are gone."""
    for pod in await _pods(api, experiment.namespace):
        name = pod["metadata"]["name"]
        with contextlib.suppress(errors.NotFound):
            await rest.request(
                api,
                method="DELETE",
                path=f"/api/v1/namespaces/{experiment.namespace}/pods/{name}",
                query={"gracePeriodSeconds": "0"},
            )

    async def gone() -> bool:
        return not await _pods(api, experiment.namespace)

    await _until(gone, timeout=experiment.timeout, what="the experiment's pods to be deleted")


async def _ensure_namespace(api: _Api, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    with contextlib.suppress(errors.Conflict):
        await rest.request(api, method="POST", path="/api/v1/namespaces", body=body)


async def run_once(experiment: Experiment, *, run: int, api: _Api) -> RunResult:
    """One SIGSTOP/SIGCONT of the leader (see the module docstring)."""
    await _ensure_namespace(api, experiment.namespace)
    await _clean(api, experiment)
    _, offset = audits.read(experiment.audit_log)
    old = Replica(experiment, f"chaos-{run}-a")
    new: Replica | None = None
    try:

        async def old_leads() -> bool:
            return await _holder(api, experiment) == old.identity

        await _until(old_leads, timeout=experiment.timeout, what=f"{old.identity} to lead")
        new = Replica(experiment, f"chaos-{run}-b")
        follower = new

        async def new_follows() -> bool:
            return follower.logged(f"is held by {old.identity}")

        await _until(new_follows, timeout=experiment.timeout, what=f"{new.identity} to follow")
        first_half = experiment.pods // 2
        await _create_pods(api, experiment, prefix=f"run{run}", start=0, end=first_half)

        async def first_half_bound() -> bool:
            pods = await _pods(api, experiment.namespace)
            return sum(1 for p in pods if p["spec"].get("nodeName")) >= first_half

        await _until(first_half_bound, timeout=experiment.timeout, what="the leader to bind")
        old.signal(signal.SIGSTOP)
        paused = time.monotonic()
        # Created while the leader is paused: its watches deliver them when it resumes, onto a
        # cache that has not yet seen the successor fill the nodes.
        await _create_pods(
            api, experiment, prefix=f"run{run}", start=first_half, end=experiment.pods
        )
        entries: list[audits.Entry] = []

        async def successor_bound() -> bool:
            nonlocal offset
            more, offset = audits.read(experiment.audit_log, offset=offset)
            entries.extend(more)
            return any(
                e.user_agent == follower.user_agent and e.succeeded and e.uri.endswith("/binding")
                for e in entries
            )

        timeout = experiment.timeout + experiment.lease_duration
        await _until(successor_bound, timeout=timeout, what=f"{new.identity} to bind pods")
        await asyncio.sleep(experiment.hold)
        old.signal(signal.SIGCONT)
        paused_for = time.monotonic() - paused

        async def old_exited() -> bool:
            return old.process.poll() is not None

        await _until(old_exited, timeout=experiment.timeout, what=f"{old.identity} to step down")

        async def all_bound() -> bool:
            pods = await _pods(api, experiment.namespace)
            return all(p["spec"].get("nodeName") for p in pods)

        with contextlib.suppress(TimeoutError):
            await _until(all_bound, timeout=experiment.timeout, what="every pod bound")
        pods = await _pods(api, experiment.namespace)
        more, offset = audits.read(experiment.audit_log, offset=offset)
        entries.extend(more)
        return _count(
            experiment,
            run=run,
            old=old,
            new=new,
            entries=entries,
            pods=pods,
            paused=paused_for,
        )
    finally:
        exit_code = old.stop()
        if new is not None:
            new.stop()
        _ = exit_code


def _count(
    experiment: Experiment,
    *,
    run: int,
    old: Replica,
    new: Replica,
    entries: list[audits.Entry],
    pods: list[rest.Body],
    paused: float,
) -> RunResult:
    by_new = [e for e in entries if e.user_agent == new.user_agent and e.write and e.succeeded]
    first = min(e.at for e in by_new)
    after = [e for e in entries if e.user_agent == old.user_agent and e.write and e.at >= first]
    return RunResult(
        run=run,
        old_leader=old.identity,
        new_leader=new.identity,
        paused_seconds=round(paused, 3),
        late_writes=sum(1 for e in after if e.succeeded),
        late_attempts=len(after),
        new_leader_writes=len(by_new),
        bound=sum(1 for p in pods if p["spec"].get("nodeName")),
        failed_pods=sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed"),
        old_leader_exit=old.process.poll(),
    )


async def run_many(experiment: Experiment, *, runs: int) -> Summary:
    """``runs`` runs one after the other; the pods of the last are deleted at the end."""
    results: list[RunResult] = []
    experiment.workdir.mkdir(parents=True, exist_ok=True)
    async with clients.connect_async(kubeconfig=str(experiment.kubeconfig)) as connection:
        for run in range(runs):
            results.append(await run_once(experiment, run=run, api=connection.api))
        await _clean(connection.api, experiment)
    return Summary(results)
