"""``berth sim``: run a what-if simulation and report it as tables, JSON and a plot.

Every input (the scenario, a trace, node specs, the plot path) is read and checked before
anything runs: a bad one is reported with its path and line and the command exits with code 2,
having simulated nothing and written nothing. See :mod:`berth.sim.runner` for what is
simulated and :mod:`berth.sim.reports` for what the report holds.
"""

from __future__ import annotations

import json
import pathlib
import sys
import typing

import click
import rich.console

from berth.api import durations
from berth.api import errors as api_errors
from berth.sim import errors, nodespecs, runner, scenarios, tables, traces
from berth.util import extras

__all__ = ["command"]

_NODES_HELP = (
    "A node pool: '[COUNTx] NAME=QTY[,NAME=QTY...] [label=K=V] [taint=K[=V]:EFFECT] "
    "[prefix=P]', e.g. '100x cpu=64,memory=512Gi,nvidia.com/gpu=8 label=pool=gpu'. "
    "Repeat for several pools; replaces the scenario's pools."
)


@click.command("sim")
@click.argument(
    "scenario",
    required=False,
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Report format on stdout.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, writable=True, path_type=pathlib.Path),
    help="Also draw utilization and queue allocation against fair share into this PNG.",
)
@click.option(
    "--trace",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="A job trace (Helios/Philly-style CSV) whose jobs become workloads.",
)
@click.option("--nodes", "node_specs", multiple=True, metavar="SPEC", help=_NODES_HELP)
@click.option("--seed", type=click.IntRange(min=0), help="Overrides spec.seed.")
@click.option("--until", help="Virtual time to stop at, e.g. 12h (overrides spec.until).")
def command(
    scenario: pathlib.Path | None,
    output: str,
    plot: pathlib.Path | None,
    trace: pathlib.Path | None,
    node_specs: tuple[str, ...],
    seed: int | None,
    until: str | None,
) -> None:
    """Simulate SCENARIO (a sim.berth.io/v1alpha1 Scenario file) on virtual time.

    The same scheduler as `berth run` places the pods; nothing talks to a cluster. With
    --trace, SCENARIO is optional: the trace's jobs run on the --nodes pools, in one queue
    per virtual cluster (weight 1 unless the scenario defines it).
    """
    err = rich.console.Console(stderr=True, highlight=False)
    try:
        built = _inputs(scenario, trace=trace, node_specs=node_specs, until=until)
    except (errors.SimError, api_errors.ApiError) as exc:
        _fail(err, str(exc))
    if plot is not None and not plot.parent.is_dir():
        _fail(err, f"cannot write the plot: {plot.parent} is not a directory")
    if plot is not None:
        # Plotting needs matplotlib (the [sim] extra): say so before simulating, not after.
        try:
            from berth.sim import plots
        except extras.MissingExtra as exc:
            _fail(err, f"--plot: {exc}")
    out = rich.console.Console(highlight=False)
    if output == "table" and err.is_terminal:
        with tables.progress(console=err, until=_until_ms(built)) as update:
            report = runner.run(built, seed=seed, progress=update)
    else:
        report = runner.run(built, seed=seed)
    if plot is not None:
        plots.plot(report, path=plot)
    if output == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        tables.render(report, console=out)
        if plot is not None:
            out.print(f"plot written to {plot}")


def _fail(err: rich.console.Console, message: str) -> typing.NoReturn:
    # Messages quote user input (regular expressions, brackets): never read them as markup.
    err.print("error:", style="bold red", end=" ")
    err.print(message, markup=False, soft_wrap=True)
    sys.exit(2)


def _inputs(
    scenario: pathlib.Path | None,
    *,
    trace: pathlib.Path | None,
    node_specs: tuple[str, ...],
    until: str | None,
) -> scenarios.Scenario:
    """The scenario to run, with the trace, node pools and ``until`` folded in."""
    if scenario is None and trace is None:
        raise errors.SimError("give a SCENARIO file, or --trace FILE.csv with --nodes SPEC")
    if scenario is None and not node_specs:
        raise errors.SimError("--trace without a SCENARIO needs --nodes SPEC for the cluster")
    base = scenarios.load(scenario) if scenario is not None else None
    pools = [nodespecs.parse(spec, index=i) for i, spec in enumerate(node_specs)]
    loaded = traces.load(trace) if trace is not None else None
    stop = durations.parse_duration(until) if until is not None else None
    return traces.compose(base, trace=loaded, nodes=pools or None, until=stop)


def _until_ms(scenario: scenarios.Scenario) -> int | None:
    return scenario.spec.until.ms if scenario.spec.until is not None else None
