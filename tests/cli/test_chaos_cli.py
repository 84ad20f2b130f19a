"""``berth chaos sigstop``'s options, through click's CliRunner (no cluster is reached).

We test these aspects:
- without ``--real`` (which builds a control plane) it needs the cluster's kubeconfig and audit
  log, and says so instead of failing on a missing file later.
"""

from __future__ import annotations

import click.testing

from berth.cli import main


def test_sigstop_needs_a_cluster_or_real() -> None:
    outcome = click.testing.CliRunner().invoke(main.cli, ["chaos", "sigstop", "--runs", "1"])
    assert outcome.exit_code == 2
    assert "--kubeconfig and --audit-log are required (or --real)" in outcome.output
