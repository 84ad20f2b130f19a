"""The operator's install set and its optional extras (``[sim]``, ``[emulator]``, ``[kubectl]``).

We test these aspects:

- the operator image's install set (Berth's unconditional requirements and everything they
  require, resolved through the installed distributions' metadata as pip resolves the
  Dockerfile's ``pip wheel .``) holds cel-python (the scheduler evaluates DRA device
  selectors) but no library any extra of pyproject.toml names; each extra names libraries of
  its own, and ``[dev]`` brings every extra;
- the Dockerfile builds and installs Berth without extras;
- ``berth run`` with the extras' libraries and Berth's emulator and simulator made
  unimportable starts, leads, binds a pod and exits 0 on SIGTERM, and imported none of them;
- a command that needs a missing extra fails with a message naming the extra to install.
"""

from __future__ import annotations

import collections.abc
import importlib.metadata
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import time
import tomllib

import packaging.requirements
import pytest

from berth.emulator import testing
from tests.kube import conftest as kube
from tests.packaging import charts

PYPROJECT = tomllib.loads((charts.REPO / "pyproject.toml").read_text())
OPTIONAL = PYPROJECT["project"]["optional-dependencies"]
EXTRAS = sorted(set(OPTIONAL) - {"dev"})
# What the extras bring, and Berth's own parts that exist for them: none is in the operator.
BLOCKED = ("matplotlib", "berth.emulator", "berth.sim")
# The extras' libraries alone (what a plain `pip install berth-scheduler` lacks).
LIBRARIES = ("matplotlib",)
_SERVING = re.compile(r"serving HTTP on [^:]+:(\d+)")


def _name(requirement: packaging.requirements.Requirement) -> str:
    return re.sub(r"[-_.]+", "-", requirement.name).lower()


def install_set(requirements: collections.abc.Iterable[str]) -> set[str]:
    """The distributions pip installs for ``requirements`` (no extras), transitively."""
    found: set[str] = set()
    pending = [packaging.requirements.Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = _name(requirement)
        if name in found:
            continue
        found.add(name)
        wanted = set(requirement.extras)
        for line in importlib.metadata.requires(name) or []:
            needed = packaging.requirements.Requirement(line)
            marker = needed.marker
            if marker is None or marker.evaluate({"extra": ""}):
                pending.append(needed)
            elif any(marker.evaluate({"extra": extra}) for extra in wanted):
                needed.marker = None
                pending.append(needed)
    return found


def _libraries(extra: str) -> set[str]:
    """The distributions ``extra`` names itself (not the other extras it includes)."""
    named = {_name(packaging.requirements.Requirement(r)) for r in OPTIONAL[extra]}
    return named - {"berth-scheduler"}


def test_the_operator_install_set_has_no_extra_library() -> None:
    operator = install_set(PYPROJECT["project"]["dependencies"])
    assert {"kopf", "kubernetes-asyncio", "numpy", "pydantic", "cel-python"} <= operator
    for extra in EXTRAS:
        assert operator.isdisjoint(_libraries(extra)), extra
    assert operator.isdisjoint({"helm-sdkpy", "pytest", "hypothesis", "matplotlib"})


@pytest.mark.parametrize("extra", EXTRAS)
def test_each_extra_brings_libraries_and_dev_brings_every_extra(extra: str) -> None:
    assert _libraries(extra), f"[{extra}] brings nothing of its own"
    assert f"berth-scheduler[{','.join(EXTRAS)}]" in OPTIONAL["dev"]


def test_the_dockerfile_installs_berth_without_extras() -> None:
    runs = [
        line
        for line in (charts.REPO / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
        if line.startswith("RUN ") and "pip " in line
    ]
    assert len(runs) == 2, runs
    assert runs[0].rstrip().endswith(" .")  # `pip wheel ... .`: the project, no [extras]
    assert runs[1].rstrip().endswith("/wheels/berth_scheduler-*.whl")


def _blocked_python(code: str, blocked: tuple[str, ...] = BLOCKED) -> list[str]:
    """A Python command line running ``code`` where the modules ``blocked`` cannot be imported."""
    blocker = textwrap.dedent(
        f"""
        import atexit, importlib.abc, os, sys
        class Blocker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if any(name == b or name.startswith(b + ".") for b in {blocked!r}):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None
        sys.meta_path.insert(0, Blocker())
        if "IMPORTED_TO" in os.environ:
            def dump():
                with open(os.environ["IMPORTED_TO"], "w") as out:
                    out.write("\\n".join(sorted(sys.modules)))
            atexit.register(dump)
        """
    )
    return [sys.executable, "-c", blocker + code]


_BERTH = "from berth.cli.main import main; sys.argv[0] = 'berth'; main()"


def test_berth_run_works_without_any_extra_and_imports_none(
    emulator: testing.RunningEmulator, tmp_path: pathlib.Path
) -> None:
    kube.install_crds(emulator)
    kube.create(emulator, kube.node("n1"), plural="nodes", namespace=None)
    imported = tmp_path / "imported.txt"
    env = {k: v for k, v in emulator.env().items() if not k.startswith("BERTH_")}
    env |= {"POD_NAME": "berth-0", "POD_NAMESPACE": "default", "IMPORTED_TO": str(imported)}
    process = subprocess.Popen(
        [*_blocked_python(_BERTH), "run", "--http-port", "0"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:  # ends if the process dies: then the assertion below fails
            if _SERVING.search(line):
                break
        else:
            raise AssertionError(f"berth run exited {process.wait()} before serving HTTP")
        kube.create(emulator, kube.pod("p1"), plural="pods")
        api = emulator.api
        pods = emulator.call(api.resource, "v1", "pods")
        deadline = time.monotonic() + 30
        # Another process's effect: polled, bounded.
        while not emulator.call(api.get, pods, namespace="default", name="p1")["spec"].get(
            "nodeName"
        ):
            assert time.monotonic() < deadline, "the pod was not bound"
            assert process.poll() is None, "berth run died"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)
    modules = set(imported.read_text().split())
    assert "berth.operator.scheduling" in modules
    leaked = {m for m in modules if any(m == b or m.startswith(b + ".") for b in BLOCKED)}
    assert leaked == set()


@pytest.mark.parametrize(
    ("args", "extra", "code"),
    [
        (["sim", "--plot", "{tmp}/plot.png", "examples/sim/fair-share.yaml"], "sim", 2),
    ],
    ids=["sim-plot"],
)
def test_a_command_needing_a_missing_extra_names_it(
    args: list[str], extra: str, code: int, tmp_path: pathlib.Path
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = subprocess.run(
        [*_blocked_python(_BERTH, LIBRARIES), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=charts.REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("BERTH_")},
    )
    assert result.returncode == code, result.stderr
    message = " ".join(result.stderr.split())
    assert f"[{extra}] extra" in message
    assert f"pip install 'berth-scheduler[{extra}]'" in message
    assert not (tmp_path / "plot.png").exists()
