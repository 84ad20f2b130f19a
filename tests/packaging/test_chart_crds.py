"""The chart's CRDs (helm/berth/crds/) and hack/sync-chart-crds.

Aspects:
- the chart ships exactly the generated CRDs of crds/, byte for byte;
- ``hack/sync-chart-crds --check`` names a changed, missing or stale copy and exits 1;
  without ``--check`` it brings the copies in sync (and removes stale ones); with no
  generated CRDs it says to run ``berth crds``.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from tests.packaging import charts

GENERATED = charts.REPO / "crds"
SHIPPED = charts.CHART / "crds"
SCRIPT = charts.REPO / "hack" / "sync-chart-crds"


def test_chart_ships_exactly_the_generated_crds() -> None:
    generated = {p.name: p.read_bytes() for p in sorted(GENERATED.glob("*.yaml"))}
    shipped = {p.name: p.read_bytes() for p in sorted(SHIPPED.glob("*.yaml"))}
    assert generated, "crds/ is empty: run `berth crds`"
    assert sorted(shipped) == sorted(generated), "run hack/sync-chart-crds"
    assert shipped == generated, "run hack/sync-chart-crds"


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    """A scratch checkout holding only the script, crds/ and the chart's crds/."""
    (tmp_path / "hack").mkdir()
    shutil.copy2(SCRIPT, tmp_path / "hack" / SCRIPT.name)
    (tmp_path / "crds").mkdir()
    (tmp_path / "helm" / "berth" / "crds").mkdir(parents=True)
    (tmp_path / "crds" / "queues.yaml").write_text("kind: CustomResourceDefinition # queues\n")
    (tmp_path / "crds" / "podgroups.yaml").write_text("kind: CustomResourceDefinition # pgs\n")
    return tmp_path


def sync(tree: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(tree / "hack" / SCRIPT.name), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_check_names_missing_changed_and_stale_copies(tree: pathlib.Path) -> None:
    chart_crds = tree / "helm" / "berth" / "crds"
    (chart_crds / "queues.yaml").write_text("kind: CustomResourceDefinition # old\n")
    (chart_crds / "removed.yaml").write_text("kind: CustomResourceDefinition\n")
    result = sync(tree, "--check")
    assert result.returncode == 1
    for name in ("queues.yaml", "podgroups.yaml", "removed.yaml (stale"):
        assert f"helm/berth/crds/{name}" in result.stderr
    assert (chart_crds / "removed.yaml").exists(), "--check must change nothing"


def test_sync_copies_the_crds_and_removes_stale_ones(tree: pathlib.Path) -> None:
    chart_crds = tree / "helm" / "berth" / "crds"
    (chart_crds / "removed.yaml").write_text("kind: CustomResourceDefinition\n")
    assert sync(tree).returncode == 0
    assert sorted(p.name for p in chart_crds.iterdir()) == ["podgroups.yaml", "queues.yaml"]
    assert (chart_crds / "queues.yaml").read_text() == (tree / "crds" / "queues.yaml").read_text()
    assert sync(tree, "--check").returncode == 0


def test_sync_without_generated_crds_says_what_to_run(tree: pathlib.Path) -> None:
    for path in (tree / "crds").iterdir():
        path.unlink()
    result = sync(tree)
    assert result.returncode == 1
    assert result.stderr == "error: no CRDs in crds/: run 'berth crds' first\n"
