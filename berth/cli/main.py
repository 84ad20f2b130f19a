"""The ``berth`` console script: one click group, one module per command.

Each command lives in its own module of :mod:`berth.cli` and is named here, so that this file
reads as the table of contents of the command line. A command's module is imported only when
that command runs (or ``--help`` lists it): ``berth run`` in the operator image never imports
the emulator or the simulator, whose libraries come with optional extras
(:mod:`berth.util.extras`).
"""

from __future__ import annotations

import importlib

import click

import berth
from berth.util import extras

__all__ = ["cli", "main"]

# Command name -> "module:attribute" of its click command.
_COMMANDS: dict[str, str] = {
    "bench": "berth.cli.bench:command",
    "chaos": "berth.cli.chaos:command",
    "crds": "berth.cli.crds:command",
    "demo": "berth.cli.up:demo_command",
    "emulator": "berth.cli.emulator:command",
    "run": "berth.cli.run:command",
    "sim": "berth.cli.sim:command",
    "up": "berth.cli.up:up_command",
}


class _LazyGroup(click.Group):
    """A group whose commands' modules are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except extras.MissingExtra as exc:
            return _needs_extra(cmd_name, exc)
        command = getattr(module, attribute)
        assert isinstance(command, click.Command)
        return command


def _needs_extra(name: str, missing: extras.MissingExtra) -> click.Command:
    """The command ``name`` that cannot load: it says which extra to install and exits 1."""

    def explain() -> None:
        raise click.ClickException(f"berth {name}: {missing}")

    return click.Command(
        name,
        callback=explain,
        help=f"(needs the [{missing.extra}] extra: {extras.install_hint(missing.extra)})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(berth.__version__, prog_name="berth")
def cli() -> None:
    """Berth: a batch scheduler for Kubernetes (gangs, queues, reservations)."""


def main() -> None:
    """Entry point of the console script."""
    cli()
