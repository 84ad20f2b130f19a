"""The ``berth`` console script: one click group, one module per command.

Each command lives in its own module of :mod:`berth.cli` and is added here, so that this file
reads as the table of contents of the command line.
"""

from __future__ import annotations

import click

import berth
from berth.cli import bench, chaos, crds, emulator, run, sim, up

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(berth.__version__, prog_name="berth")
def cli() -> None:
    """Berth: a batch scheduler for Kubernetes (gangs, queues, reservations)."""


def main() -> None:
    """Entry point of the console script."""
    cli()


cli.add_command(crds.command)
cli.add_command(bench.command)
cli.add_command(chaos.command)
cli.add_command(run.command)
cli.add_command(sim.command)
cli.add_command(emulator.command)
cli.add_command(up.up_command)
cli.add_command(up.demo_command)
