"""The plots examples/sim/README.md shows are what the scheduler and plotting code draw today.

We test these aspects: ``hack/gen-sim-plots --check`` finds every plot of docs/sim current
(each records the digest of the report it was drawn from and of the plotting code; the check
runs each scenario again), and it fails naming a plot whose recorded digest no longer matches.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "gen-sim-plots"

pytestmark = pytest.mark.slow


def _check(root: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "hack" / "gen-sim-plots"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_readme_plots_are_current() -> None:
    checked = _check(REPO)
    assert checked.returncode == 0, checked.stderr


def test_a_stale_plot_is_named(tmp_path: pathlib.Path) -> None:
    # A copy of what the script reads, with one plot swapped for another scenario's.
    for part in ("berth", "examples", "hack", "docs/sim"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(REPO / "docs/sim/reclaim.png", tmp_path / "docs/sim/fair-share.png")
    checked = _check(tmp_path)
    assert checked.returncode == 1
    assert "stale (run hack/gen-sim-plots): docs/sim/fair-share.png" in checked.stderr
