"""``berth chaos sigstop``'s options, through click's CliRunner (no cluster is reached).

We test these aspects:
- without ``--real`` (which builds a control plane) it needs the cluster's kubeconfig and audit
  log, and says so instead of failing on a missing file later;
- its default sizes fit the plane ``--real`` builds (issue #31's ``berth chaos sigstop --real
  --runs 10`` once timed out in every run: 200 pods of 1 cpu on 48 cpus);
- when no run plays out, it exits 3, apart from a pass (0) and a broken invariant (1).
"""

from __future__ import annotations

import collections.abc
import contextlib
import json

import click.testing
import pytest

from berth.api import quantities
from berth.chaos import sigstop
from berth.cli import chaos, main
from berth.emulator import kubelets


def test_sigstop_needs_a_cluster_or_real() -> None:
    outcome = click.testing.CliRunner().invoke(main.cli, ["chaos", "sigstop", "--runs", "1"])
    assert outcome.exit_code == 2
    assert "--kubeconfig and --audit-log are required (or --real)" in outcome.output


def test_the_default_pods_fit_the_real_plane() -> None:
    """``berth chaos sigstop --real`` as typed, without sizes, schedules its pods: each half
    (before the pause, after it) fits the six nodes ``--real`` builds, with room to spare."""
    defaults = {p.name: p.default for p in chaos.sigstop_command.params}
    pods, cpu = defaults["pods"], defaults["cpu"]
    assert isinstance(pods, int) and isinstance(cpu, str)
    pools = [kubelets.parse_pool(spec, index=i) for i, spec in enumerate(chaos.REAL_NODES)]
    cpus = sum(p.count * quantities.parse_milli(p.allocatable["cpu"]) for p in pools)
    assert (pods - pods // 2) * quantities.parse_milli(cpu) <= cpus / 2


def test_no_run_played_out_exits_apart_from_a_pass_and_a_violation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every run timing out before the pause shows nothing: the JSON still prints, with the
    runs that could not play out, but the exit status is 3, neither 0 (a pass) nor 1."""

    @contextlib.contextmanager
    def plane(experiment: object, *, real: bool) -> collections.abc.Iterator[object]:
        yield experiment

    async def timed_out(experiment: object, *, runs: int) -> sigstop.Summary:
        timed = [
            f"run {n}: timed out after 60s waiting for the leader to bind" for n in range(runs)
        ]
        return sigstop.Summary([], timed)

    monkeypatch.setattr(chaos, "_on_real_plane", plane)
    monkeypatch.setattr(sigstop, "run_many", timed_out)
    outcome = click.testing.CliRunner().invoke(
        main.cli, ["chaos", "sigstop", "--real", "--runs", "2"]
    )
    assert outcome.exit_code == 3, outcome.output
    printed = json.loads(outcome.stdout.splitlines()[0])
    assert printed["runs"] == 0 and len(printed["incomplete"]) == 2
    assert "no run played out (2 incomplete)" in outcome.stderr
