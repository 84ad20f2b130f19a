"""``berth crds``: write the CRDs the models render into ``crds/``, or check they match.

``berth crds`` (re)writes ``crds/queues.yaml``, ``crds/podgroups.yaml`` and
``crds/reservations.yaml``; ``berth crds --check`` changes nothing and exits 1 naming every
file that differs, so CI catches a model changed without regenerating. ``hack/gen-crds`` runs
the first form.
"""

from __future__ import annotations

import pathlib

import click

from berth.api import crds

__all__ = ["command"]


@click.command("crds")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=pathlib.Path),
    default=pathlib.Path("crds"),
    show_default=True,
    help="Directory holding the CRD YAML files.",
)
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if any file differs.")
def command(output_dir: pathlib.Path, check: bool) -> None:
    """Render the Queue, PodGroup and Reservation CRDs from Berth's models."""
    if check:
        differing = crds.check(output_dir)
        if differing:
            names = ", ".join(str(p) for p in differing)
            click.echo(f"out of date (run `berth crds`): {names}", err=True)
            raise SystemExit(1)
        click.echo(f"{output_dir}: up to date ({len(crds.DEFINITIONS)} CRDs)")
        return
    for path in crds.write(output_dir):
        click.echo(f"wrote {path}")
