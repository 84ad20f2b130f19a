"""Every install set the README documents, installed into a fresh virtualenv, gives its commands.

We test these aspects:

- the README's install table is read as the promise: each row names an install command
  (``pip install 'berth-scheduler[EXTRAS]'``, or ``pip install -e '.[EXTRAS]'`` in a checkout)
  and the commands it gives; every command named has a probe here, so the table cannot promise
  a command no test runs;
- for each row, a fresh virtualenv gets exactly that install (Berth's wheel built from this
  checkout, or the checkout itself for ``-e``; pip resolves pyproject.toml's extras, nothing
  here lists their libraries) and each of the row's commands is run as a user would: ``berth
  run`` places a pod on a cluster, ``berth up`` serves until interrupted, ``berth demo`` runs
  the examples to the end, ``berth sim --plot`` writes its PNG. Every row also gives the plain
  install's commands, which come with every set: run in full in the plain install and where a
  row names them again, elsewhere ``berth run``, ``up``, ``demo`` and ``emulator`` show their
  ``--help`` (the machine is shared);
- in every virtualenv, ``berth --help`` and each command's ``--help`` work (a command whose
  extra is missing says so instead of failing to import); in the plain install, a command of
  an extra is either usable already or names the extra to install, never a traceback.

The ``[real]`` row's ``berth up --real`` starts a real control plane: it runs in the
``realcluster`` tier (tests/realcluster/test_up_real.py), not here.
"""

from __future__ import annotations

import pathlib
import re
import signal
import subprocess
import time
import typing

import pytest

from berth.emulator import testing
from tests.kube import conftest as kube
from tests.packaging import venvs

pytestmark = pytest.mark.slow

SETS = venvs.documented_sets()
CORE_COMMANDS = next(s.commands for s in SETS if s.install == venvs.CORE)
_SERVING = re.compile(r"serving HTTP on [^:]+:(\d+)")
REPO = venvs.REPO
Venv = venvs.Venv


def test_the_readme_documents_install_sets_with_probes_for_every_command() -> None:
    assert venvs.CORE in {s.install for s in SETS}
    assert any(set(s.extras) >= {"emulator", "sim", "kubectl"} for s in SETS)
    for install_set in SETS:
        assert install_set.commands, install_set.install
        for command in install_set.commands:
            assert command in PROBES or command in REAL_CLUSTER_COMMANDS, (
                f"the README promises {command!r} for {install_set.install}; add its probe"
            )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Berth's wheel, built from this checkout as a release would be."""
    return venvs.build_wheel(tmp_path_factory.mktemp("sources"), tmp_path_factory.mktemp("wheel"))


# Probes: how a user would run each documented command, and what they would see ----------------
Probe = typing.Callable[[Venv, pathlib.Path], None]


def _ok(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stdout, f"{text!r} not in:\n{result.stdout}"


def _serves_until_interrupted(
    venv: Venv, argv: list[str], ready: str, *, timeout: float = 120
) -> list[str]:
    """Start a long-running command, wait for its ``ready`` line, interrupt it: exit 0."""
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=venv.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + timeout
        for line in process.stdout:  # ends if the process exits
            lines.append(line)
            if ready in line:
                break
            assert time.monotonic() < deadline, "".join(lines)
        else:
            raise AssertionError(f"exited {process.wait()} before {ready!r}:\n{''.join(lines)}")
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
        lines.extend(rest.splitlines(keepends=True))
        assert process.returncode == 0, "".join(lines)
        assert "Traceback" not in "".join(lines), "".join(lines)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    return lines


def probe_berth_run(venv: Venv, tmp: pathlib.Path) -> None:
    """``berth run`` leads and binds a pod on a cluster, and stops on SIGTERM."""
    _ok(venv.run(venv.bin("berth"), "run", "--help"), "Usage: berth run")
    running = testing.start_emulator(tmp)
    try:
        kube.install_crds(running)
        kube.create(running, kube.node("n1"), plural="nodes", namespace=None)
        env = venv.env(
            KUBECONFIG=str(running.kubeconfig), POD_NAME="berth-0", POD_NAMESPACE="default"
        )
        process = subprocess.Popen(
            [venv.bin("berth"), "run", "--http-port", "0"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stderr is not None
            for line in process.stderr:
                if _SERVING.search(line):
                    break
            else:
                raise AssertionError(f"berth run exited {process.wait()} before serving")
            kube.create(running, kube.pod("p1"), plural="pods")
            api = running.api
            pods = running.call(api.resource, "v1", "pods")
            deadline = time.monotonic() + 60
            # Another process's effect: polled, bounded.
            while not running.call(api.get, pods, namespace="default", name="p1")["spec"].get(
                "nodeName"
            ):
                assert time.monotonic() < deadline, "berth run did not bind the pod"
                assert process.poll() is None, "berth run died"
                time.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=10)
    finally:
        running.threaded.stop()


def probe_berth_sim(venv: Venv, tmp: pathlib.Path) -> None:
    _ok(
        venv.run(venv.bin("berth"), "sim", "examples/sim/fair-share.yaml"),
        "utilization",
    )


def probe_berth_sim_plot(venv: Venv, tmp: pathlib.Path) -> None:
    plot = tmp / "fair-share.png"
    _ok(venv.run(venv.bin("berth"), "sim", "examples/sim/fair-share.yaml", "--plot", str(plot)))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def probe_kubectl_berth(venv: Venv, tmp: pathlib.Path) -> None:
    _ok(venv.run(venv.bin("kubectl-berth"), "--help"), "kubectl berth why")


def probe_kubectl_create_reservation(venv: Venv, tmp: pathlib.Path) -> None:
    _ok(venv.run(venv.bin("kubectl-create-reservation"), "--help"), "--owner-selector")


def probe_berth_up(venv: Venv, tmp: pathlib.Path) -> None:
    _ok(venv.run(venv.bin("berth"), "up", "--help"), "--real", "--mode", "--kubeconfig")
    kubeconfig = tmp / "up.kubeconfig"
    lines = _serves_until_interrupted(
        venv,
        [venv.bin("berth"), "up", "--nodes", "1x cpu=2", "--kubeconfig", str(kubeconfig)],
        "Press Ctrl+C",
    )
    assert f"export KUBECONFIG={kubeconfig}" in "".join(lines)
    assert "server:" in kubeconfig.read_text()


def probe_berth_up_admission(venv: Venv, tmp: pathlib.Path) -> None:
    """``berth up --mode admission``: the webhook's certificate is made, the chart's webhooks
    registered, and it serves until interrupted."""
    lines = _serves_until_interrupted(
        venv,
        [venv.bin("berth"), "up", "--mode", "admission", "--nodes", "1x cpu=2",
         "--kubeconfig", str(tmp / "admission.kubeconfig")],
        "Press Ctrl+C",
    )  # fmt: skip
    assert "Berth runs in admission mode" in "".join(lines)


def probe_berth_demo(venv: Venv, tmp: pathlib.Path) -> None:
    """In a checkout, ``berth demo`` runs the examples to the end; elsewhere, without
    ``--examples``, it says where to run it (the wheel holds no examples)."""
    _ok(venv.run(venv.bin("berth"), "demo", timeout=300), "every example placed and run")
    elsewhere = venv.run(venv.bin("berth"), "demo", cwd=tmp)
    assert elsewhere.returncode == 1, elsewhere.stderr
    assert "run berth demo in a checkout of Berth, or pass --examples DIR" in " ".join(
        elsewhere.stderr.split()
    )


def probe_berth_emulator(venv: Venv, tmp: pathlib.Path) -> None:
    kubeconfig = tmp / "emulator.kubeconfig"
    _serves_until_interrupted(
        venv,
        [venv.bin("berth"), "emulator", "--port", "0", "--kubeconfig", str(kubeconfig)],
        "serving http://",
    )
    assert kubeconfig.is_file()


def probe_kubectl(venv: Venv, tmp: pathlib.Path) -> None:
    assert (venv.root / "bin" / "kubectl").is_file(), "kubectl is not in the virtualenv"
    _ok(venv.run(venv.bin("kubectl"), "version", "--client"), "Client Version")


PROBES: dict[str, Probe] = {
    "berth run": probe_berth_run,
    "berth sim": probe_berth_sim,
    "berth sim --plot": probe_berth_sim_plot,
    "kubectl berth": probe_kubectl_berth,
    "kubectl create reservation": probe_kubectl_create_reservation,
    "berth up": probe_berth_up,
    "berth up --mode admission": probe_berth_up_admission,
    "berth demo": probe_berth_demo,
    "berth emulator": probe_berth_emulator,
    "kubectl": probe_kubectl,
}


# The plain install's commands where they come with a bigger set: enough to see them work.
def _help_of(command: str) -> Probe:
    """The cheap probe of ``berth COMMAND``: its help."""

    def probe(venv: Venv, tmp: pathlib.Path) -> None:
        _ok(venv.run(venv.bin("berth"), command, "--help"), f"Usage: berth {command}")

    return probe


CHEAP_PROBES: dict[str, Probe] = {
    f"berth {command}": _help_of(command) for command in ("run", "up", "demo", "emulator")
}
# Commands that start a real control plane: probed in the realcluster tier.
REAL_CLUSTER_COMMANDS = frozenset({"berth up --real"})
_BERTH_COMMANDS = ("bench", "chaos", "crds", "demo", "emulator", "run", "sim", "up")


def _every_help_works(venv: Venv) -> None:
    _ok(venv.run(venv.bin("berth"), "--help"), *_BERTH_COMMANDS)
    for name in _BERTH_COMMANDS:
        helped = venv.run(venv.bin("berth"), name, "--help")
        _ok(helped, f"Usage: berth {name}")


def _works_or_names_its_extra(venv: Venv, command: str, tmp: pathlib.Path) -> None:
    """A command of an extra run in the plain install: it works (its extra brings nothing it
    needs any more) or it fails naming the extra to install."""
    try:
        PROBES[command](venv, tmp)
    except AssertionError as failed:
        message = " ".join(str(failed).split())
        assert "pip install 'berth-scheduler[" in message, message
        assert "Traceback" not in message, message


@pytest.mark.timeout(1800)  # a fresh virtualenv, then every command: minutes on a busy machine
@pytest.mark.parametrize(
    "install_set",
    [s for s in SETS if not s.editable],
    ids=lambda s: s.name if s.extras else "plain",
)
def test_a_fresh_install_gives_the_commands_the_readme_promises(
    install_set: venvs.InstallSet, wheel: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    venv = venvs.make_venv(tmp_path, install_set, wheel)
    _every_help_works(venv)
    for command in dict.fromkeys((*CORE_COMMANDS, *install_set.commands)):
        scratch = tmp_path / re.sub(r"\W+", "-", command)
        scratch.mkdir()
        # The plain install's commands run in full there; the other sets, which bring the
        # same plus libraries, run the cheap form of those (the machine is shared).
        probe = PROBES[command]
        if command not in install_set.commands:
            probe = CHEAP_PROBES.get(command, probe)
        probe(venv, scratch)
    if install_set.install == venvs.CORE:
        promised = {c for s in SETS for c in s.commands} - set(CORE_COMMANDS)
        for command in sorted(c for c in promised - REAL_CLUSTER_COMMANDS if c[:6] == "berth "):
            scratch = tmp_path / ("missing-" + re.sub(r"\W+", "-", command))
            scratch.mkdir()
            _works_or_names_its_extra(venv, command, scratch)
