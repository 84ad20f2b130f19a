"""The failover experiment: a leader cut off must never write after its successor has started.

One run, against any kubeconfig whose API server writes an audit log this machine can read:

1. start replica A (``berth run``, short lease timings), wait until it holds the Lease; start
   replica B and wait until it follows. Another tenant's pods are placed: a canary, and a
   queue limited to ``limit_cpu`` cpus with two pods more than fit;
2. create half of the pods in the experiment's namespace; once A has bound them, **disrupt**
   A and create the other half. The :class:`Disruption` is :class:`SigStop` (SIGSTOP, and
   SIGCONT to end it) or, in :mod:`berth.chaos.partition`, a fault of the proxy between A and
   the API server;
3. wait (from the audit log) until B has taken the Lease and bound pods, let it fill the
   nodes for ``hold`` seconds, then **end the disruption** — A resumes with its watches
   delivering the new pods onto a cache that has not seen B's bindings, and its binder
   workers, status writers and scheduling loop free to act on them;
4. wait until A has exited (it lost the Lease) and every pod is bound, or a timeout; then
   delete the burst and create ``after_pods`` more: the survivor must still schedule.

Counted at the API server: A's successful writes after B's first write (must be 0), A's write
attempts after that (refused ones included, for information), pods ``Failed`` (a pod bound
on stale data onto a node the successor had filled is failed ``OutOf<resource>`` by the
kubelet; must be 0), pods bound more than once (successful bindings per pod in the audit
log; 0), the other tenant's pods harmed (the canary moved, replaced or failed; 0), its queue
over its limit (0), and whether the after-pods were bound. The replicas tell themselves apart
by their user agent, ``berth/<identity>``.

:func:`run_many` repeats it; :class:`Summary` is what ``berth chaos sigstop`` prints.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import time
import typing

from berth.api import core, keys
from berth.chaos import audits
from berth.kube.transport import clients, errors, rest
from berth.realcluster import identities
from berth.util import children, wakeups

__all__ = [
    "Disruption",
    "Experiment",
    "Replica",
    "RunResultJson",
    "SummaryJson",
    "RunResult",
    "SigStop",
    "Summary",
    "run_many",
    "run_once",
]

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
    scheduler_name: str = "berth-scheduler"  # the replicas', and their Lease's name
    extra_env: typing.Mapping[str, str] = dataclasses.field(default_factory=dict)
    tenant_namespace: str = "berth-chaos-tenant"  # the other tenant: a canary, a limited queue
    limit_cpu: int = 2  # that queue's cpu limit (its pods ask 1 cpu each; two more than fit)
    after_pods: int = 4  # created once the burst is deleted: the survivor must bind them
    replica_kubeconfig: pathlib.Path | None = None  # the replicas' own (default: kubeconfig)
    replica_service_account: str = ""
    """``NAMESPACE/NAME``: each replica runs as that ServiceAccount from a stand-in pod named
    after its identity (a token bound to the pod, :mod:`berth.realcluster.identities`), as a
    replica pod of the chart would: the identity the chart's leader fence checks. Made with
    ``kubeconfig`` (an administrator's); overrides ``replica_kubeconfig``."""

    @property
    def replicas_kubeconfig(self) -> pathlib.Path:
        """What the replicas run with: a chart's ServiceAccount, say, while the harness itself
        (creating namespaces, queues and pods) uses ``kubeconfig``."""
        return self.replica_kubeconfig or self.kubeconfig

    def credentials(self, identity: str) -> pathlib.Path:
        """The kubeconfig replica ``identity`` runs with (see ``replica_service_account``)."""
        if not self.replica_service_account:
            return self.replicas_kubeconfig
        namespace, _, name = self.replica_service_account.partition("/")
        return identities.bound_kubeconfig(
            self.kubeconfig,
            namespace=namespace,
            service_account=name,
            pod=identity,
            to=self.workdir / f"{identity}.kubeconfig",
        )

    def forget(self, identity: str) -> None:
        """Delete replica ``identity``'s stand-in pod, if it has one."""
        if self.replica_service_account:
            namespace = self.replica_service_account.partition("/")[0]
            identities.remove(self.kubeconfig, namespace=namespace, pod=identity)


class RunResultJson(typing.TypedDict):
    """A :class:`RunResult` in the summary's ``detail``."""

    run: int
    old_leader: str
    new_leader: str
    paused_seconds: float
    late_writes: int
    late_attempts: int
    new_leader_writes: int
    bound: int
    failed_pods: int
    old_leader_exit: int | None
    bound_twice: int
    tenant_harmed: int
    queue_over_limit: int
    scheduled_after: bool
    new_leader_refused: int
    late: list[str]


class SummaryJson(typing.TypedDict):
    """The JSON object ``berth chaos sigstop`` prints."""

    runs: int
    incomplete: list[str]
    late_writes: int
    late_attempts: int
    new_leader_refused: int
    failed_pods: int
    bound_twice: int
    tenant_harmed: int
    queue_over_limit: int
    scheduled_after: bool
    violations: list[str]
    detail: list[RunResultJson]


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
    bound_twice: int = 0  # pods with more than one successful binding in the audit log
    tenant_harmed: int = 0  # the other tenant's canary moved, replaced or failed
    queue_over_limit: int = 0  # the other tenant's queue: cpus bound past its limit
    scheduled_after: bool = True  # the after-pods were all bound
    new_leader_refused: int = 0  # the new leader's writes answered 403 (a fence at the server
    # that had not yet seen it take the Lease; for information)
    late: tuple[str, ...] = ()  # the late attempts: "verb path status", in the server's order

    @property
    def violations(self) -> list[str]:
        """The invariants this run broke, in words (empty when it held)."""
        broken = {
            "the old leader wrote after its successor": self.late_writes,
            "pods failed": self.failed_pods,
            "pods bound more than once": self.bound_twice,
            "another tenant's pod harmed": self.tenant_harmed,
            "a queue over its limit": self.queue_over_limit,
            "the survivor stopped scheduling": not self.scheduled_after,
        }
        return [f"{what}: {int(n)}" for what, n in broken.items() if n]

    def as_dict(self) -> RunResultJson:
        return {
            "run": self.run,
            "old_leader": self.old_leader,
            "new_leader": self.new_leader,
            "paused_seconds": self.paused_seconds,
            "late_writes": self.late_writes,
            "late_attempts": self.late_attempts,
            "new_leader_writes": self.new_leader_writes,
            "bound": self.bound,
            "failed_pods": self.failed_pods,
            "old_leader_exit": self.old_leader_exit,
            "bound_twice": self.bound_twice,
            "tenant_harmed": self.tenant_harmed,
            "queue_over_limit": self.queue_over_limit,
            "scheduled_after": self.scheduled_after,
            "new_leader_refused": self.new_leader_refused,
            "late": list(self.late),
        }


@dataclasses.dataclass(frozen=True)
class Summary:
    runs: list[RunResult]
    incomplete: list[str] = dataclasses.field(default_factory=list)
    """Runs that could not play out, and why (e.g. the successor itself lost the Lease on an
    overloaded machine before binding): neither a pass nor a violation."""

    def as_dict(self) -> SummaryJson:
        return {
            "runs": len(self.runs),
            "incomplete": self.incomplete,
            "late_writes": sum(r.late_writes for r in self.runs),
            "late_attempts": sum(r.late_attempts for r in self.runs),
            "new_leader_refused": sum(r.new_leader_refused for r in self.runs),
            "failed_pods": sum(r.failed_pods for r in self.runs),
            "bound_twice": sum(r.bound_twice for r in self.runs),
            "tenant_harmed": sum(r.tenant_harmed for r in self.runs),
            "queue_over_limit": sum(r.queue_over_limit for r in self.runs),
            "scheduled_after": all(r.scheduled_after for r in self.runs),
            "violations": [f"run {r.run}: {v}" for r in self.runs for v in r.violations],
            "detail": [r.as_dict() for r in self.runs],
        }


class Replica:
    """One ``berth run`` process with its own identity, log file and user agent."""

    def __init__(
        self, experiment: Experiment, identity: str, *, kubeconfig: pathlib.Path | None = None
    ) -> None:
        self.identity = identity
        self.log = experiment.workdir / f"{identity}.log"
        kubeconfig = kubeconfig or experiment.credentials(identity)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
        env |= {
            "BERTH_KUBECONFIG": str(kubeconfig),
            "BERTH_NAMESPACE": experiment.lease_namespace,
            "BERTH_HTTP_HOST": "127.0.0.1",
            "BERTH_HTTP_PORT": "0",
            "BERTH_SHUTDOWN_TIMEOUT": "3",
            "BERTH_SCHEDULER_NAME": experiment.scheduler_name,
            "BERTH_LEADER_ELECTION__LEASE_NAME": experiment.scheduler_name,
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
        """SIGCONT (in case), SIGTERM, wait; SIGKILL if it does not go (:func:`children.stop`).
        The exit status."""
        code = children.stop(self.process, grace=timeout)
        self._out.close()
        return code


class Disruption(typing.Protocol):
    """What cuts the leader off (begin) and lets it go on (end)."""

    def kubeconfig(self, experiment: Experiment, own: pathlib.Path) -> pathlib.Path | None:
        """The kubeconfig the leader-to-be runs with, given its ``own`` (None: that one)."""

    def begin(self, leader: Replica) -> None: ...

    def end(self, leader: Replica) -> None: ...


class SigStop:
    """The leader's process is paused (SIGSTOP) and resumed (SIGCONT)."""

    def kubeconfig(self, experiment: Experiment, own: pathlib.Path) -> pathlib.Path | None:
        return None

    def begin(self, leader: Replica) -> None:
        leader.signal(signal.SIGSTOP)

    def end(self, leader: Replica) -> None:
        leader.signal(signal.SIGCONT)


async def _until(
    predicate: typing.Callable[[], typing.Awaitable[bool]], *, timeout: float, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        await wakeups.sleep_or_stop(0.05)


async def _holder(api: _Api, experiment: Experiment) -> str | None:
    path = (
        f"/apis/coordination.k8s.io/v1/namespaces/{experiment.lease_namespace}"
        f"/leases/{experiment.scheduler_name}"
    )
    try:
        lease = await rest.request(api, method="GET", path=path, timeout=10)
    except errors.NotFound:
        return None
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _pods(api: _Api, namespace: str) -> list[core.Pod]:
    listed = await rest.request(
        api, method="GET", path=f"/api/v1/namespaces/{namespace}/pods", timeout=30
    )
    return list(listed.get("items") or [])


def _pod(name: str, experiment: Experiment, *, cpu: str | None = None, queue: str = "") -> core.Pod:
    labels = {"app": "berth-chaos", **({keys.QUEUE_LABEL: queue} if queue else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": experiment.scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu or experiment.cpu}},
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


def _queue_name(experiment: Experiment) -> str:
    return f"{experiment.tenant_namespace}-limited"


async def _place_tenant(api: _Api, experiment: Experiment) -> dict[str, tuple[str, str]]:
    """The other tenant's canary and limited queue's pods, placed; the canary's (uid, node)."""
    tenant = dataclasses.replace(experiment, namespace=experiment.tenant_namespace)
    await _ensure_namespace(api, tenant.namespace)
    await _clean(api, tenant)
    queue = {
        "apiVersion": keys.API_VERSION,
        "kind": "Queue",
        "metadata": {"name": _queue_name(experiment)},
        "spec": {"limit": {"cpu": str(experiment.limit_cpu)}},
    }
    with contextlib.suppress(errors.Conflict):
        await rest.request(api, method="POST", path=f"/apis/{keys.API_VERSION}/queues", body=queue)
    path = f"/api/v1/namespaces/{tenant.namespace}/pods"
    await rest.request(api, method="POST", path=path, body=_pod("canary", tenant, cpu="1"))
    for i in range(experiment.limit_cpu + 2):
        body = _pod(f"limited-{i}", tenant, cpu="1", queue=_queue_name(experiment))
        await rest.request(api, method="POST", path=path, body=body)

    async def placed() -> bool:
        pods = await _pods(api, tenant.namespace)
        bound = {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}
        return "canary" in bound and len(bound) > experiment.limit_cpu

    await _until(placed, timeout=experiment.timeout, what="the other tenant's pods to be placed")
    return {
        p["metadata"]["name"]: (p["metadata"]["uid"], p["spec"]["nodeName"])
        for p in await _pods(api, tenant.namespace)
        if p["metadata"]["name"] == "canary"
    }


async def _tenant_counts(
    api: _Api, experiment: Experiment, canary: dict[str, tuple[str, str]]
) -> tuple[int, int]:
    """(the canary harmed: 0 or 1, cpus the limited queue holds past its limit)."""
    pods = {p["metadata"]["name"]: p for p in await _pods(api, experiment.tenant_namespace)}
    now = pods.get("canary")
    harmed = int(
        now is None
        or (now["metadata"]["uid"], now["spec"].get("nodeName")) != canary.get("canary")
        or (now.get("status") or {}).get("phase") == "Failed"
        or bool(now["metadata"].get("deletionTimestamp"))
    )
    limited = sum(
        1 for name, p in pods.items() if name.startswith("limited-") and p["spec"].get("nodeName")
    )
    return harmed, max(0, limited - experiment.limit_cpu)


async def _schedules_after(api: _Api, experiment: Experiment, *, run: int) -> bool:
    """Delete the burst, create ``after_pods`` more: are they all bound in time?"""
    await _clean(api, experiment)
    await _create_pods(api, experiment, prefix=f"after{run}", start=0, end=experiment.after_pods)

    async def all_bound() -> bool:
        pods = await _pods(api, experiment.namespace)
        return all(p["spec"].get("nodeName") for p in pods)

    try:
        await _until(all_bound, timeout=experiment.timeout, what="the after-pods bound")
    except TimeoutError:
        return False
    return True


async def run_once(
    experiment: Experiment,
    *,
    run: int,
    api: _Api,
    disruption: Disruption | None = None,
) -> RunResult:
    """One disruption of the leader, SIGSTOP by default (see the module docstring)."""
    disruption = disruption or SigStop()
    await _ensure_namespace(api, experiment.namespace)
    await _clean(api, experiment)
    _, offset = audits.read(experiment.audit_log)
    leader = f"chaos-{run}-a"
    own = experiment.credentials(leader)
    old = Replica(experiment, leader, kubeconfig=disruption.kubeconfig(experiment, own) or own)
    new: Replica | None = None
    try:

        async def old_leads() -> bool:
            return await _holder(api, experiment) == old.identity

        await _until(old_leads, timeout=experiment.timeout, what=f"{old.identity} to lead")
        canary = await _place_tenant(api, experiment)
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
        disruption.begin(old)
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
        await wakeups.sleep_or_stop(experiment.hold)  # the successor leads beside it
        disruption.end(old)
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
        harmed, over = await _tenant_counts(api, experiment, canary)
        after = await _schedules_after(api, experiment, run=run)
        more, offset = audits.read(experiment.audit_log, offset=offset)
        entries.extend(more)
        counted = _count(
            experiment,
            run=run,
            old=old,
            new=new,
            entries=entries,
            pods=pods,
            paused=paused_for,
        )
        return dataclasses.replace(
            counted, tenant_harmed=harmed, queue_over_limit=over, scheduled_after=after
        )
    finally:
        old.stop()
        experiment.forget(old.identity)
        if new is not None:
            new.stop()
            experiment.forget(new.identity)


def _count(
    experiment: Experiment,
    *,
    run: int,
    old: Replica,
    new: Replica,
    entries: list[audits.Entry],
    pods: list[core.Pod],
    paused: float,
) -> RunResult:
    by_new = [e for e in entries if e.user_agent == new.user_agent and e.write and e.succeeded]
    bindings = collections.Counter(
        e.uri.split("?")[0]
        for e in entries
        if e.succeeded and e.uri.split("?")[0].endswith("/binding")
    )
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
        bound_twice=sum(1 for n in bindings.values() if n > 1),
        new_leader_refused=sum(
            1 for e in entries if e.user_agent == new.user_agent and e.write and e.code == 403
        ),
        late=tuple(f"{e.verb} {e.uri.split('?')[0]} {e.code}" for e in after),
    )


async def run_many(
    experiment: Experiment, *, runs: int, disruption: Disruption | None = None
) -> Summary:
    """``runs`` runs one after the other; the pods of the last are deleted at the end. A run
    that times out waiting for a step is recorded as incomplete and the next one starts."""
    results: list[RunResult] = []
    incomplete: list[str] = []
    experiment.workdir.mkdir(parents=True, exist_ok=True)
    async with clients.connect_async(kubeconfig=str(experiment.kubeconfig)) as connection:
        for run in range(runs):
            try:
                results.append(
                    await run_once(experiment, run=run, api=connection.api, disruption=disruption)
                )
            except TimeoutError as exc:
                incomplete.append(f"run {run}: {exc}")
        await _clean(connection.api, experiment)
        await _clean(
            connection.api, dataclasses.replace(experiment, namespace=experiment.tenant_namespace)
        )
    return Summary(results, incomplete)
