"""``berth bench``: benchmarks that print one JSON object each.

``berth bench basic|gang|cycle`` time one scheduling session of the core's workloads (see
:mod:`berth.sim.benchmarks`) with the default profile, on this machine, and print ``scenario``,
``nodes``, ``pods``, ``placed``, ``seconds``, ``cpu_seconds``, ``pods_per_second``, ``p50_ms``,
``p99_ms``, ``rss_mb``, ``errors`` and ``disabled``. ``--nodes``/``--pods`` shrink or grow a
workload; ``--disable PLUGIN`` leaves a plugin out of the default profile (its cost: the same
run with and without it). ``backlog``
times the cycles of a full cluster with a long backlog (parked work; see
:func:`berth.sim.benchmarks.run_backlog`). Other engineers'
benchmarks (``sim``, ``emulator``) join the same group as subcommands. ``gpu-sharing``
compares GPU placement policies on the same arrivals (:mod:`berth.sim.gpusharing`).
``pod-events`` times the cache's work for each watch event of a pod
(:mod:`berth.sim.pod_events`); ``requests`` the client's work for each API request
(:mod:`berth.cli.bench_requests`).
"""

from __future__ import annotations

import json
import pathlib
import typing

import click
import pydantic

from berth.api import manifests
from berth.cli import bench_requests, e2e, soak
from berth.cli import emulator as emulator_cli
from berth.operator import errors as operator_errors
from berth.operator import scheduling
from berth.operator import settings as operator_settings
from berth.scheduler.actions import registry as actions_registry
from berth.scheduler.framework import errors as framework_errors
from berth.scheduler.framework import profiles
from berth.scheduler.plugins import registry as plugin_registry
from berth.sim import benchmarks, gpusharing, pod_events, stress

__all__ = ["command"]

T = typing.TypeVar("T", int, float)


@click.group("bench")
def command() -> None:
    """Benchmarks; each prints one JSON object."""


def _plugins(ctx: click.Context, param: click.Parameter, names: tuple[str, ...]) -> tuple[str, ...]:
    """``--disable``'s names, each a plugin of the default profile."""
    known = benchmarks.default_plugins()
    for plugin in names:
        if plugin not in known:
            raise click.BadParameter(
                f"{plugin!r} is not a plugin of the default profile ({', '.join(known)})"
            )
    return names


def _scenario(name: str, summary: str) -> click.Command:
    @click.command(name, help=summary)
    @click.option("--nodes", type=click.IntRange(min=1), default=None, help="Nodes in the cluster.")
    @click.option("--pods", type=click.IntRange(min=1), default=None, help="Pods to place.")
    @click.option(
        "--disable",
        "disabled",
        multiple=True,
        metavar="PLUGIN",
        callback=_plugins,
        help="Leave this plugin out of the default profile (repeatable).",
    )
    @click.option(
        "--output",
        type=click.Choice(["json"]),
        default="json",
        show_default=True,
        help="Output format.",
    )
    def scenario(
        nodes: int | None, pods: int | None, disabled: tuple[str, ...], output: str
    ) -> None:
        sizes = {k: v for k, v in (("nodes", nodes), ("pods", pods)) if v is not None}
        workload = benchmarks.SCENARIOS[name](**sizes)
        result, _ = benchmarks.run(workload, disabled=disabled)
        click.echo(json.dumps(result.to_json()))

    return scenario


command.add_command(
    _scenario(
        "basic",
        "kube-scheduler's SchedulingBasic: 5000 nodes, 1000 running pods, 10 000 pods to place.",
    )
)
command.add_command(
    _scenario("gang", "One 1000-pod gang (minMember 1000, cpu 1 / memory 2Gi) on 5000 nodes.")
)
command.add_command(
    _scenario(
        "cycle",
        "One full session: 5000 nodes, 40 000 running pods, 10 000 pending pods in 500 groups"
        " across 10 queues.",
    )
)


@command.command("backlog")
@click.option("--nodes", type=click.IntRange(min=1), default=1_000, show_default=True)
@click.option("--pods", type=click.IntRange(min=1), default=50_000, show_default=True)
def backlog(nodes: int, pods: int) -> None:
    """Full nodes and a long backlog: a cycle with nothing changed, one after a pod ends (ms)."""
    workload = benchmarks.backlog(nodes=nodes, pods=pods)
    click.echo(json.dumps(benchmarks.run_backlog(workload)))


for _name, _summary in (
    ("anti-affinity", "scheduler_perf SchedulingPodAntiAffinity: 5000 nodes, 1000 pods to place."),
    ("preferred-affinity", "scheduler_perf SchedulingPreferredPodAffinity: 5000 nodes."),
    ("topology-spread", "scheduler_perf TopologySpreading: 5000 nodes in 3 zones."),
    ("host-ports", "Host ports: 5000 nodes, every pod binds host port 8080."),
    ("volumes", "Volumes: 5000 nodes, every pod with its own claim of a CSI driver."),
):
    command.add_command(_scenario(_name, _summary))


@command.command("pod-events")
@click.option("--pods", type=click.IntRange(min=1), default=20_000, show_default=True)
def pod_events_command(pods: int) -> None:
    """CPU microseconds per pod watch event in the cache: created, bound, running."""
    click.echo(json.dumps(pod_events.run(pods=pods)))


@command.command("requests")
@click.option("--requests", type=click.IntRange(min=1), default=20_000, show_default=True)
@click.option(
    "--in-flight",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Requests in flight at once (the binder's default).",
)
def requests_command(requests: int, in_flight: int) -> None:
    """Client CPU microseconds per API request (a binding) sent as Berth sends it."""
    click.echo(json.dumps(bench_requests.run(requests=requests, in_flight=in_flight)))


@command.command("sim")
@click.option("--jobs", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--nodes", type=click.IntRange(min=1), default=1_000, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True)
@click.option(
    "--schedule-period",
    default="0s",
    show_default=True,
    help="The scenario's schedulePeriod (0s: a cycle at every change).",
)
def sim(jobs: int, nodes: int, seed: int, schedule_period: str) -> None:
    """berth sim on a generated scenario: JOBS jobs in four queues on NODES nodes."""
    result = stress.measure(jobs=jobs, nodes=nodes, seed=seed, schedule_period=schedule_period)
    click.echo(json.dumps(result))


@command.command("peers")
@click.option(
    "--real",
    is_flag=True,
    help="On a real control plane (required: Kueue runs only there).",
)
@click.option("--nodes", type=click.IntRange(min=1), default=16, show_default=True)
@click.option(
    "--jobs", type=click.IntRange(min=1), default=240, show_default=True, help="Jobs of 4 pods."
)
@click.option(
    "--weights",
    default="1,1,2,4",
    show_default=True,
    help="One queue per weight (comma-separated), the same for Kueue and Berth.",
)
@click.option(
    "--run-seconds",
    default="10,30",
    show_default=True,
    help="Each Job's run time is drawn uniformly between these (seconds, played by KWOK).",
)
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=1800.0,
    show_default=True,
    help="Seconds each system has to run every Job.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, writable=True, path_type=pathlib.Path),
    default=None,
    help="Also draw each queue's share over time, per system, into this PNG.",
)
@click.option(
    "--berth-config",
    type=click.Path(exists=True, dir_okay=False, path_type=pathlib.Path),
    default=None,
    help="Run Berth with this configuration file (as berth run --config takes it: the "
    "scheduler profile and settings) instead of its defaults.",
)
def peers(
    real: bool,
    nodes: int,
    jobs: int,
    weights: str,
    run_seconds: str,
    seed: int,
    timeout: float,
    plot: pathlib.Path | None,
    berth_config: pathlib.Path | None,
) -> None:
    """The same batch Jobs to Kueue + kube-scheduler, then to Berth, on one cluster (JSON).

    Jobs of parallelism 4 in queues of the given weights, more than the cluster holds: Jobs
    started per minute, time until all ran, each queue's share against its weighted fair
    share, partial gangs, and the CPU each system's controller and scheduler used.
    """
    if not real:
        raise click.UsageError("berth bench peers runs Kueue on a real control plane: add --real")
    parsed_weights = _numbers(weights, "--weights", float)
    bounds = _numbers(run_seconds, "--run-seconds", int)
    if len(bounds) != 2 or not 0 < bounds[0] <= bounds[1]:
        raise click.BadParameter(
            f"{run_seconds!r}: two counts of seconds, low then high", param_hint="--run-seconds"
        )
    if any(w <= 0 for w in parsed_weights):
        raise click.BadParameter(f"{weights!r}: weights must be above 0", param_hint="--weights")
    if berth_config is not None:
        _check_berth_config(berth_config)
    # berth.cli.peers imports the real control plane only when asked for it.
    from berth.cli import peers as peers_bench

    measured = peers_bench.measure(
        nodes=nodes,
        jobs=jobs,
        weights=parsed_weights,
        seconds=(bounds[0], bounds[1]),
        seed=seed,
        timeout=timeout,
        berth_config=berth_config,
    )
    if plot is not None and measured["complete"]:
        from berth.cli import peers_plot

        peers_plot.draw(measured, plot)
    click.echo(json.dumps(measured))
    if measured["errors"]:
        raise click.ClickException(
            "not everything finished: "
            + "; ".join(f"{e['error']} (logs: {e['logs']})" for e in measured["errors"])
        )


def _check_berth_config(path: pathlib.Path) -> None:
    """Refuse a configuration ``berth run --config`` would refuse, before any cluster starts:
    its settings, then its profile, read as the operator reads them."""
    try:
        config = operator_settings.Settings(config=path)
        profile = scheduling.load_profile(config.profile_document())
        actions = {action.name for action in actions_registry.default_actions()}
        profiles.resolve(profile, registry=plugin_registry.in_tree_registry(), actions=actions)
    except (operator_errors.ConfigFileError, framework_errors.ProfileError) as exc:
        raise click.BadParameter(str(exc), param_hint="--berth-config") from None
    except pydantic.ValidationError as exc:
        problems = manifests.describe(exc, whole="settings")
        raise click.BadParameter(problems, param_hint="--berth-config") from None


def _numbers(text: str, option: str, kind: type[T]) -> list[T]:
    try:
        return [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: comma-separated numbers", param_hint=option) from None


@command.command("gpu-sharing")
@click.option(
    "--mix",
    "mixes",
    type=click.Choice([*gpusharing.MIXES, "all"]),
    multiple=True,
    default=("all",),
    show_default=True,
    help="Task mixes to run (repeat the option for several).",
)
@click.option(
    "--policy",
    "policies",
    type=click.Choice([*gpusharing.POLICIES, "all"]),
    multiple=True,
    default=("all",),
    show_default=True,
    help="Placement policies to compare on the same arrivals (repeat for several).",
)
@click.option(
    "--scale",
    type=click.FloatRange(min=0.05, max=20),
    default=1.0,
    show_default=True,
    help="Multiplies the node counts (1: 110 GPU nodes, 540 GPUs).",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1, max=100),
    default=1,
    show_default=True,
    help="Arrival draws per mix (seeds 1..N); results are their mean.",
)
def gpu_sharing(
    mixes: tuple[str, ...], policies: tuple[str, ...], scale: float, seeds: int
) -> None:
    """GPU allocation at 100 % and 130 % of the GPUs arrived, per policy (FGD's experiment)."""
    chosen_mixes = list(gpusharing.MIXES) if "all" in mixes else list(dict.fromkeys(mixes))
    chosen = list(gpusharing.POLICIES) if "all" in policies else list(dict.fromkeys(policies))
    result = gpusharing.measure(
        mixes=chosen_mixes, policies=chosen, scale=scale, seeds=tuple(range(1, seeds + 1))
    )
    click.echo(json.dumps(result))


command.add_command(emulator_cli.bench_command)
command.add_command(e2e.command)
command.add_command(soak.command)
