"""``berth chaos``: experiments that break Berth on purpose, printing one JSON object each.

``berth chaos sigstop`` pauses the leader past its Lease and resumes it after a successor has
taken over (:mod:`berth.chaos.sigstop`), against any kubeconfig whose API server writes an
audit log on this machine (``berth emulator --audit-log``, kube-apiserver's
``--audit-log-path``). ``berth chaos partition`` cuts the leader off through the fault proxy
instead (:mod:`berth.chaos.partition`); ``berth chaos proxy`` runs that proxy by itself,
taking faults as commands on its standard input. ``berth chaos fuzz`` has a hostile tenant
send generated garbage (:mod:`berth.chaos.fuzz`). The exit status is 1 when an invariant
broke, and 3 when no run of ``sigstop`` or ``partition`` played out (each timed out before the
pause: nothing was shown, so it must not read as a pass).
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import dataclasses
import json
import pathlib
import shutil
import sys
import tempfile
import typing

import click

from berth.chaos import fuzz, partition, proxy, sigstop
from berth.emulator import kubelets
from berth.realcluster import binaries, controlplane, install

__all__ = ["command"]


@click.group("chaos")
def command() -> None:
    """Fault-injection experiments; each prints one JSON object."""


def _failover_options(function: typing.Callable[..., None]) -> typing.Callable[..., None]:
    """The options of the failover experiments (sigstop, partition)."""
    for option in reversed(
        [
            click.option(
                "--kubeconfig",
                type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
                default=None,
                help="The cluster to run against (Berth's CRDs installed, nodes with room for "
                "the pods); required unless --real.",
            ),
            click.option(
                "--replica-kubeconfig",
                type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
                default=None,
                help="What the replicas run with (e.g. the chart's ServiceAccount, whose "
                "requests the audit policy records); default: --kubeconfig.",
            ),
            click.option(
                "--replica-service-account",
                default="",
                metavar="NAMESPACE/NAME",
                help="Run each replica as this ServiceAccount from a stand-in pod named after "
                "it (a token bound to the pod, made with --kubeconfig), as the chart's replica "
                "pods are: what its leader fence checks. Overrides --replica-kubeconfig.",
            ),
            click.option(
                "--audit-log",
                type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
                default=None,
                help="The API server's audit log (JSON lines, level Metadata or more); "
                "required unless --real.",
            ),
            click.option(
                "--real",
                is_flag=True,
                help="Build a real control plane for the experiment (as berth up --real does, "
                "with no Berth of its own), install the chart in scheduler mode with its leader "
                "fence, and run the replicas as its ServiceAccount on its Lease.",
            ),
            click.option("--runs", type=click.IntRange(min=1), default=1, show_default=True),
            # 40 pods of 100m: half before the pause, half after, fit the six 8-cpu nodes of
            # --real (and "a few free cpus" of another cluster) with room to spare.
            click.option("--pods", type=click.IntRange(min=4), default=40, show_default=True),
            click.option(
                "--cpu", default="100m", show_default=True, help="Each pod's cpu request."
            ),
            click.option(
                "--namespace", default="berth-chaos", show_default=True, help="For the pods."
            ),
            click.option("--lease-namespace", default="default", show_default=True),
            click.option(
                "--scheduler-name",
                default="berth-scheduler",
                show_default=True,
                help="The replicas' scheduler name and Lease name: another than a running "
                "Berth's keeps the two apart (berth up --real).",
            ),
            click.option(
                "--timings",
                type=(float, float, float),
                default=(4.0, 3.0, 0.5),
                show_default=True,
                help="Lease duration, renew deadline, retry period (seconds); 15 10 2 is the "
                "default.",
            ),
            click.option("--hold", type=float, default=1.0, show_default=True),
        ]
    ):
        function = option(function)
    return function


def _experiment(
    workdir: pathlib.Path,
    *,
    kubeconfig: pathlib.Path | None,
    replica_kubeconfig: pathlib.Path | None,
    replica_service_account: str,
    audit_log: pathlib.Path | None,
    real: bool,
    pods: int,
    cpu: str,
    namespace: str,
    lease_namespace: str,
    scheduler_name: str,
    timings: tuple[float, float, float],
    hold: float,
) -> sigstop.Experiment:
    if real:
        # Filled in by _on_real_plane; the chart's Lease, which its leader fence watches.
        kubeconfig = audit_log = workdir
        lease_namespace = install.NAMESPACE
        scheduler_name = "berth-scheduler"
        replica_service_account = f"{install.NAMESPACE}/{install.SERVICE_ACCOUNT}"
    if kubeconfig is None or audit_log is None:
        raise click.UsageError("--kubeconfig and --audit-log are required (or --real)")
    duration, deadline, retry = timings
    return sigstop.Experiment(
        kubeconfig=kubeconfig,
        replica_kubeconfig=replica_kubeconfig,
        replica_service_account=replica_service_account,
        audit_log=audit_log,
        workdir=workdir,
        namespace=namespace,
        lease_namespace=lease_namespace,
        scheduler_name=scheduler_name,
        lease_duration=duration,
        renew_deadline=deadline,
        retry_period=retry,
        pods=pods,
        cpu=cpu,
        hold=hold,
        timeout=max(60.0, 4 * duration),
    )


REAL_NODES = ("6x cpu=8,memory=32Gi,pods=110",)


@contextlib.contextmanager
def _on_real_plane(
    experiment: sigstop.Experiment, *, real: bool
) -> collections.abc.Iterator[sigstop.Experiment]:
    """``experiment`` itself, or (``--real``) pointed at a real control plane built for it in
    its work directory, with the chart installed; the plane is stopped afterwards."""
    if not real:
        yield experiment
        return
    try:
        found = binaries.find()
    except binaries.BinariesMissing as missing:
        raise click.ClickException(str(missing)) from None
    plane = controlplane.ControlPlane(
        experiment.workdir / "real-cluster",
        pools=[kubelets.parse_pool(spec, index=i) for i, spec in enumerate(REAL_NODES)],
        binaries=found,
        audited_users=[install.USER],
        progress=lambda step: click.echo(f"berth chaos: {step}", err=True),
    )
    with plane:
        asyncio.run(install.install(plane, mode="scheduler"))
        yield dataclasses.replace(
            experiment, kubeconfig=plane.admin_kubeconfig, audit_log=plane.audit_log
        )


@command.command("partition")
@_failover_options
@click.option(
    "--fault",
    type=click.Choice([f.value for f in proxy.Fault if f is not proxy.Fault.NONE]),
    default=proxy.Fault.RESET.value,
    show_default=True,
    help="reset: connections reset; drop: a black hole; stall: bytes held, delivered late.",
)
def partition_command(runs: int, fault: str, real: bool, **options: typing.Any) -> None:
    """Cut the leader off from the API server (a loopback proxy's fault) past its Lease, heal
    it after a successor took over; check the invariants (JSON)."""
    with tempfile.TemporaryDirectory(prefix="berth-chaos-") as workdir:
        planned = _experiment(pathlib.Path(workdir), real=real, **options)
        with _on_real_plane(planned, real=real) as experiment:
            summary = asyncio.run(
                partition.run_many(experiment, runs=runs, fault=proxy.Fault(fault))
            )
    _conclude(summary)


@command.command("proxy")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
    required=True,
    help="The cluster whose API server (on this machine) the proxy stands in front of.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    required=True,
    help="Where to write the kubeconfig that goes through the proxy.",
)
@click.option("--port", type=click.IntRange(min=0, max=65535), default=0, show_default=True)
def proxy_command(kubeconfig: pathlib.Path, out: pathlib.Path, port: int) -> None:
    """Run the fault proxy; read commands on stdin, one a line: `latency SECONDS`, `stall`,
    `drop`, `reset`, `heal`, `stats`, `quit`. Each answers one JSON line."""
    with proxy.ThreadedProxy(partition.upstream(kubeconfig), port=port) as through:
        partition.proxied_kubeconfig(kubeconfig, port=through.port, to=out)
        click.echo(json.dumps({"listening": through.port, "kubeconfig": str(out)}))
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            verb, *args = words
            try:
                if verb == "quit":
                    break
                if verb == "latency" and len(args) == 1:
                    through.set_latency(float(args[0]))
                elif verb == "heal" and not args:
                    through.set_fault(proxy.Fault.NONE)
                elif verb in ("stall", "drop", "reset") and not args:
                    through.set_fault(proxy.Fault(verb))
                elif verb != "stats":
                    raise ValueError(f"unknown command {line.strip()!r}")
            except ValueError as exc:
                click.echo(json.dumps({"error": str(exc)}))
                continue
            click.echo(
                json.dumps(
                    {
                        "fault": through.proxy.fault.value,
                        "latency": through.proxy.latency,
                        **dataclasses.asdict(through.counters),
                    }
                ),
            )


def _conclude(summary: sigstop.SummaryJson) -> None:
    """Print ``summary``; exit 1 when an invariant broke, 3 when no run played out (2 is
    click's for a usage error)."""
    click.echo(json.dumps(summary))
    if summary["violations"]:
        raise SystemExit(1)
    if not summary["runs"]:
        click.echo(
            f"no run played out ({len(summary['incomplete'])} incomplete): nothing was shown; "
            "see 'incomplete' for the step each one timed out on",
            err=True,
        )
        raise SystemExit(3)


@command.command("sigstop")
@_failover_options
def sigstop_command(runs: int, real: bool, **options: typing.Any) -> None:
    """SIGSTOP the leader past its Lease, SIGCONT it after a successor took over; count its
    writes after the successor's first one and the pods that failed (both must be 0), and the
    other invariants (JSON)."""
    with tempfile.TemporaryDirectory(prefix="berth-chaos-") as workdir:
        planned = _experiment(pathlib.Path(workdir), real=real, **options)
        with _on_real_plane(planned, real=real) as experiment:
            summary = asyncio.run(sigstop.run_many(experiment, runs=runs)).as_dict()
    _conclude(summary)


@command.command("fuzz")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
    required=True,
    help="The cluster to run against (Berth running, its CRDs installed, a few free cpus).",
)
@click.option("--examples", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--audit-log",
    type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
    default=None,
    help="The API server's audit log: checks every pod was bound at most once.",
)
@click.option("--limit-cpu", type=click.IntRange(min=1), default=4, show_default=True)
def fuzz_command(
    kubeconfig: pathlib.Path,
    examples: int,
    seed: int,
    audit_log: pathlib.Path | None,
    limit_cpu: int,
) -> None:
    """A hostile tenant sends hypothesis-generated garbage (Python client and kubectl); check
    that no other tenant noticed and Berth still schedules."""
    kubectl = shutil.which("kubectl")
    report = asyncio.run(
        fuzz.run(
            kubeconfig=kubeconfig,
            examples=examples,
            seed=seed,
            kubectl=kubectl,
            audit_log=audit_log,
            limit_cpu=limit_cpu,
        )
    )
    click.echo(json.dumps(report.as_dict()))
    if report.violations:
        raise SystemExit(1)
