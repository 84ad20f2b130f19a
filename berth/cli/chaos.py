"""``berth chaos``: experiments that break Berth on purpose, printing one JSON object each.

``berth chaos sigstop`` pauses the leader past its Lease and resumes it after a successor has
taken over (:mod:`berth.chaos.sigstop`), against any kubeconfig whose API server writes an
audit log on this machine (``berth emulator --audit-log``, kube-apiserver's
``--audit-log-path``). ``berth chaos fuzz`` has a hostile tenant send generated garbage
(:mod:`berth.chaos.fuzz`). The exit status is 1 when an invariant broke.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil
import tempfile

import click

from berth.chaos import fuzz, sigstop

__all__ = ["command"]


@click.group("chaos")
def command() -> None:
    """Fault-injection experiments; each prints one JSON object."""


@command.command("sigstop")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
    required=True,
    help="The cluster to run against (Berth's CRDs installed, nodes with room for the pods).",
)
@click.option(
    "--audit-log",
    type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
    required=True,
    help="The API server's audit log (JSON lines, level Metadata or more).",
)
@click.option("--runs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--pods", type=click.IntRange(min=4), default=200, show_default=True)
@click.option("--cpu", default="1", show_default=True, help="Each pod's cpu request.")
@click.option("--namespace", default="berth-chaos", show_default=True, help="For the pods.")
@click.option("--lease-namespace", default="default", show_default=True)
@click.option(
    "--timings",
    type=(float, float, float),
    default=(4.0, 3.0, 0.5),
    show_default=True,
    help="Lease duration, renew deadline, retry period (seconds); 15 10 2 is the default.",
)
@click.option("--hold", type=float, default=1.0, show_default=True)
def sigstop_command(
    kubeconfig: pathlib.Path,
    audit_log: pathlib.Path,
    runs: int,
    pods: int,
    cpu: str,
    namespace: str,
    lease_namespace: str,
    timings: tuple[float, float, float],
    hold: float,
) -> None:
    """SIGSTOP the leader past its Lease, SIGCONT it after a successor took over; count its
    writes after the successor's first one and the pods that failed (both must be 0)."""
    duration, deadline, retry = timings
    with tempfile.TemporaryDirectory(prefix="berth-chaos-") as workdir:
        experiment = sigstop.Experiment(
            kubeconfig=kubeconfig,
            audit_log=audit_log,
            workdir=pathlib.Path(workdir),
            namespace=namespace,
            lease_namespace=lease_namespace,
            lease_duration=duration,
            renew_deadline=deadline,
            retry_period=retry,
            pods=pods,
            cpu=cpu,
            hold=hold,
            timeout=max(60.0, 4 * duration),
        )
        summary = asyncio.run(sigstop.run_many(experiment, runs=runs)).as_dict()
    click.echo(json.dumps(summary))
    if summary["late_writes"] or summary["failed_pods"]:
        raise SystemExit(1)


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
