"""``berth emulator`` and ``berth bench emulator``: the in-memory Kubernetes API server.

``berth emulator`` runs it standalone with simulated nodes: it writes a kubeconfig pointing at
itself, prints one line saying where it serves, and runs until interrupted (SIGINT or SIGTERM).
Node pools are given as ``--nodes SPEC`` (repeatable; see
:data:`berth.emulator.kubelets.SPEC_HELP`). ``berth bench emulator`` measures its throughput
(:mod:`berth.emulator.bench`) and prints one JSON object; it joins the ``bench`` group.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import json
import pathlib
import signal

import click

from berth.emulator import bench, kubelets, server
from berth.util import wakeups

__all__ = ["bench_command", "command", "parse_pools"]


def parse_pools(
    ctx: click.Context, param: click.Parameter, specs: collections.abc.Sequence[str]
) -> list[kubelets.NodePool]:
    """The ``--nodes SPEC`` values as node pools (a click callback; ``berth up`` shares it)."""
    pools = []
    for index, spec in enumerate(specs):
        try:
            pools.append(kubelets.parse_pool(spec, index=index))
        except kubelets.PoolSpecError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return pools


@click.command(
    "emulator",
    epilog=f"SPEC:\n\n{kubelets.SPEC_HELP}".replace("\n", "\n\n"),
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, help="Port to listen on (0: any free port).")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    default="berth-emulator.kubeconfig",
    show_default=True,
    help="Where to write a kubeconfig for this server.",
)
@click.option(
    "--nodes",
    "pools",
    multiple=True,
    metavar="SPEC",
    callback=parse_pools,
    help="A pool of simulated nodes (repeatable), e.g. '3x cpu=8,memory=32Gi'.",
)
@click.option(
    "--speedup",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="How much faster than real time the simulated kubelets run.",
)
@click.option(
    "--audit-log",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    default=None,
    help="Append every served request to this file, as kube-apiserver's --audit-log-path.",
)
def command(
    host: str,
    port: int,
    kubeconfig: pathlib.Path,
    pools: list[kubelets.NodePool],
    speedup: float,
    audit_log: pathlib.Path | None,
) -> None:
    """Run Berth's in-memory Kubernetes API server (with simulated nodes) until interrupted."""
    asyncio.run(
        _serve(
            host=host,
            port=port,
            kubeconfig=kubeconfig,
            pools=pools,
            speedup=speedup,
            audit_log=audit_log,
        )
    )


async def _serve(
    *,
    host: str,
    port: int,
    kubeconfig: pathlib.Path,
    pools: list[kubelets.NodePool],
    speedup: float,
    audit_log: pathlib.Path | None = None,
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # not on every platform
            loop.add_signal_handler(signum, stop.set)
    async with server.Emulator(host=host, port=port, audit_log=audit_log) as running:
        if pools:
            await running.start_kubelets(pools, speedup=speedup)
        running.write_kubeconfig(kubeconfig)
        nodes = sum(p.count for p in pools)
        click.echo(
            f"berth emulator: serving {running.url} with {nodes} simulated node(s); "
            f"export KUBECONFIG={kubeconfig.resolve()}"
        )
        await wakeups.first_set(stop)
    click.echo("berth emulator: stopped")


@click.command("emulator")
@click.option(
    "--pods",
    default=2000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Pods to create and then bind.",
)
@click.option(
    "--watchers",
    default=10,
    show_default=True,
    type=click.IntRange(min=0),
    help="Concurrent pod watches that must each see every event.",
)
@click.option(
    "--concurrency",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    help="Concurrent HTTP clients creating and binding.",
)
def bench_command(pods: int, watchers: int, concurrency: int) -> None:
    """The emulator's throughput: creates/s, binds/s, watch events/s (one JSON object)."""
    result = bench.run(pods=pods, watchers=watchers, concurrency=concurrency)
    click.echo(json.dumps(result.to_json()))
