"""``berth run``: the operator process, as the Helm chart starts it in a cluster.

Flags override ``BERTH_*`` environment variables, which override the ``--config`` file (see
:mod:`berth.operator.settings`); a flag left out leaves the lower sources in charge. SIGTERM and
SIGINT stop the process gracefully (leader-only parts stopped, Lease released, exit 0); losing
the Lease exits 1, so that Kubernetes restarts the pod as a follower; unusable settings exit 2.
"""

from __future__ import annotations

import asyncio
import pathlib
import typing

import click
import pydantic

from berth.api import manifests
from berth.kube.transport import errors as kube_errors
from berth.operator import errors, main, scheduling, settings
from berth.util import logging as berth_logging
from berth.util import signals

__all__ = ["command"]

# Exit status for settings that cannot be used, as click uses for usage errors.
_USAGE = 2


@click.command("run")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="Kubeconfig file. Default: $KUBECONFIG, ~/.kube/config, else in-cluster.",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="YAML configuration: the scheduler profile and settings in camelCase.",
)
@click.option("--namespace", help="Namespace Berth runs in and keeps its Lease in.")
@click.option(
    "--leader-elect/--no-leader-elect",
    default=None,
    help="Campaign for the Lease before scheduling (default: on).",
)
@click.option("--http-port", type=click.IntRange(0, 65535), help="Port of probes and metrics.")
@click.option("--scheduler-name", help="Schedule pods whose spec.schedulerName is this.")
@click.option(
    "--mode",
    type=click.Choice([m.value for m in settings.Mode]),
    help="scheduler: Berth binds; admission: Berth admits, kube-scheduler binds.",
)
@click.option("--log-level", help="debug, info, warning, error, or a verbosity 0..10.")
@click.option("--period", help="Longest pause between scheduling cycles when nothing changes (1s).")
@click.option(
    "--reservation-retention",
    help="How long an ended Reservation is kept before it is deleted (24h).",
)
@click.option(
    "--eviction-wait",
    help="How long a preemptor waits for its evicted victims to be gone (30s).",
)
@click.option(
    "--queueing-hints/--no-queueing-hints",
    default=None,
    help="Leave work that cannot fit untried until something changes that could let it fit "
    "(default: on; docs/scheduler.md).",
)
@click.option(
    "--enable-debug-api",
    is_flag=True,
    default=None,
    help="Serve POST /debug/flags/s and /debug/flags/v.",
)
def command(**flags: typing.Any) -> None:
    """Run the Berth operator: HTTP, leader election, and as leader the scheduler."""
    config = _load_settings(flags)
    berth_logging.configure(config.log_level)
    try:
        code = asyncio.run(_run(config))
    except kube_errors.ConfigError as exc:
        click.echo(f"berth run: {exc}", err=True)
        raise SystemExit(_USAGE) from None
    raise SystemExit(int(code))


# Untyped: click's option values by parameter name (whatever each option's type makes them):
# Settings validates them, and names the bad one.
def _load_settings(flags: dict[str, typing.Any]) -> settings.Settings:
    overrides = {k: v for k, v in flags.items() if v is not None and k != "leader_elect"}
    if flags.get("leader_elect") is not None:
        overrides["leader_election"] = {"enabled": flags["leader_elect"]}
    try:
        return settings.Settings(**overrides)
    except errors.ConfigFileError as exc:
        click.echo(f"berth run: {exc}", err=True)
    except pydantic.ValidationError as exc:
        problems = manifests.describe(exc, whole="settings", separator="\n  ")
        click.echo(f"berth run: invalid settings:\n  {problems}", err=True)
    raise SystemExit(_USAGE)


async def _run(config: settings.Settings) -> main.ExitCode:
    stop = asyncio.Event()
    # The process's handlers (berth.util.signals): the embedded Kopf cannot take them.
    signals.on_stop(stop.set)
    try:
        return await main.run(config, stop=stop, leader_components=scheduling.leader_components)
    finally:
        signals.remove()
