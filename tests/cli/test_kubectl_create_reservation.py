"""``kubectl create reservation``: the kubectl-create-reservation plugin.

Aspects:
- flags become the Reservation the API models accept (owners of all three kinds, requests,
  node selector, tolerations, ttl/expires, queue, allocateOnce), checked in-process;
- bad flag values fail with one ``error: ...`` line naming the flag and exit 1, before any
  cluster is contacted; usage errors exit 2 in one line; a traceback only with ``--v`` > 0;
- with the real ``kubectl`` (the venv's bin on PATH) against the emulator: the issue's command
  creates a valid Reservation; ``--dry-run=client -o yaml`` prints it and creates nothing;
  ``--dry-run=server`` stores nothing; bad flags fail as above; an existing name reads as
  kubectl's AlreadyExists; ``-n``, ``--kubeconfig`` and ``--context`` (with the context's
  namespace) are honoured; missing CRDs are named as such; ``--help`` shows examples.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import typing
from collections.abc import Iterator

import kubernetes
import pytest
import yaml

from berth.api import reservations
from berth.cli import kubectl_create_reservation as plugin
from berth.emulator import testing
from berth.kube.transport import clients
from berth.util import clocks

REPO = pathlib.Path(__file__).resolve().parents[2]
# The issue's example, after ``kubectl create reservation``.
ISSUE_COMMAND = [
    *("r1", "--cpu", "4", "--memory", "8Gi", "--gpu", "1"),
    *("--owner-selector", "app=train", "--ttl", "2h"),
]
RESERVATIONS = "/apis/scheduling.berth.io/v1alpha1/namespaces/{namespace}/reservations"


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        plugin.main(args)
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


# Flags -> Reservation (in-process) ------------------------------------------------------------

BUILD_CASES: dict[str, tuple[dict[str, typing.Any], dict[str, typing.Any]]] = {
    "selector-owner-with-ttl": (
        {"cpu": "4", "memory": "8Gi", "gpu": "1", "owner_selector": ("app=train",), "ttl": "2h"},
        {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "reserve",
                            "resources": {
                                "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}
                            },
                        }
                    ]
                }
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": "train"}}}],
            "ttl": "2h",
            "allocateOnce": True,
            "unschedulable": False,
        },
    ),
    "pod-controller-and-multi-label-owners": (
        {
            "cpu": "500m",
            "owner_pod": ("trainer-0",),
            "owner_controller": ("job/nightly", "MPIJob/big"),
            "owner_selector": ("app=train,team=nlp",),
        },
        {
            "owners": [
                {"object": {"name": "trainer-0"}},
                {"controller": {"kind": "Job", "name": "nightly"}},
                {"controller": {"kind": "MPIJob", "name": "big"}},
                {"labelSelector": {"matchLabels": {"app": "train", "team": "nlp"}}},
            ]
        },
    ),
    "placement-and-extended-resources": (
        {
            "resource": ("example.com/fpga=2", "hugepages-2Mi=1Gi"),
            "owner_pod": ("a",),
            "node_selector": ("pool=gpu", "topology.kubernetes.io/zone=z1"),
            "toleration": (
                "dedicated=gpu:NoSchedule", "spot:NoExecute", "maintenance", ":NoSchedule"
            ),
        },
        {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "reserve",
                            "resources": {
                                "requests": {"example.com/fpga": "2", "hugepages-2Mi": "1Gi"}
                            },
                        }
                    ],
                    "nodeSelector": {"pool": "gpu", "topology.kubernetes.io/zone": "z1"},
                    "tolerations": [
                        {
                            "key": "dedicated", "operator": "Equal", "value": "gpu",
                            "effect": "NoSchedule",
                        },
                        {"key": "spot", "operator": "Exists", "effect": "NoExecute"},
                        {"key": "maintenance", "operator": "Exists"},
                        {"operator": "Exists", "effect": "NoSchedule"},
                    ],
                }
            },
        },
    ),
    "queue-and-keep-holding": (
        {"cpu": "2", "owner_pod": ("web-0",), "queue": "team-a", "allocate_once": False},
        {"queue": "team-a", "allocateOnce": False},
    ),
    "expires-instead-of-ttl": (
        {"cpu": "1", "owner_pod": ("a",), "expires": "2026-01-02T06:00:00+02:00"},
        {"expires": "2026-01-02T04:00:00Z"},
    ),
    "ttl-zero-never-expires": (
        {"cpu": "1", "owner_pod": ("a",), "ttl": "0"},
        {"ttl": "0"},
    ),
    "booked-for-tonight": (
        {"cpu": "1", "owner_pod": ("a",), "start_at": "2026-01-01T22:00:00+01:00", "ttl": "4h"},
        {"startAt": "2026-01-01T21:00:00Z", "ttl": "4h"},
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("given", "expected"), BUILD_CASES.values(), ids=BUILD_CASES.keys()
)  # fmt: skip
def test_flags_build_the_reservation(
    given: dict[str, typing.Any], expected: dict[str, typing.Any], virtual_clock: clocks.Clock
) -> None:
    flags = plugin.Flags(name="r1", **given)
    built = plugin.build(flags, namespace="team-a", clock=virtual_clock).to_api()
    assert built["metadata"] == {"name": "r1", "namespace": "team-a"}
    assert {k: built["spec"][k] for k in expected} == expected
    # What the plugin builds is what the API models (and so the CRD) accept, unchanged.
    assert reservations.Reservation.model_validate(built).to_api() == built


def test_namespace_is_left_out_when_not_given(virtual_clock: clocks.Clock) -> None:
    flags = plugin.Flags(name="r1", cpu="1", owner_pod=("a",))
    assert plugin.build(flags, namespace=None, clock=virtual_clock).to_api()["metadata"] == {
        "name": "r1"
    }


# Errors (in-process: no cluster is contacted, KUBECONFIG points nowhere) ----------------------

BAD_FLAGS = {
    "negative-cpu": (
        ["--cpu", "-1", "--owner-pod", "a"],
        "error: --cpu: '-1' is negative: a reservation holds zero or more",
    ),
    "malformed-ttl": (
        ["--cpu", "4", "--owner-pod", "a", "--ttl", "5parsecs"],
        "error: --ttl: duration '5parsecs' is malformed: use a number and a unit "
        "(ns, us, ms, s, m, h), e.g. '90m', '1h30m', '1.5h', or '0'",
    ),
    "no-owner": (
        ["--cpu", "4"],
        "error: a reservation needs at least one owner: give --owner-pod NAME, "
        "--owner-controller KIND/NAME or --owner-selector KEY=VALUE",
    ),
    "memory-in-gigabytes-spelled-wrong": (
        ["--memory", "8GB", "--owner-pod", "a"],
        "error: --memory: '8GB' is not a quantity: write a number with an optional suffix, "
        "e.g. 500m, 4, 8Gi, 1e3",
    ),
    "nothing-to-reserve": (
        ["--cpu", "0", "--owner-pod", "a"],
        "error: nothing to reserve: give --cpu, --memory, --gpu or --resource NAME=QUANTITY",
    ),
    "ttl-and-expires": (
        ["--cpu", "1", "--owner-pod", "a", "--ttl", "1h", "--expires", "2099-01-01T00:00:00Z"],
        "error: give --ttl or --expires, not both",
    ),
    "expires-in-the-past": (
        ["--cpu", "1", "--owner-pod", "a", "--expires", "2020-01-01T00:00:00Z"],
        "error: --expires: 2020-01-01T00:00:00Z has already passed: give a time in the future",
    ),
    "start-at-in-the-past": (
        ["--cpu", "1", "--owner-pod", "a", "--start-at", "2020-01-01T00:00:00Z"],
        "error: --start-at: 2020-01-01T00:00:00Z has already passed: give a time in the future",
    ),
    "start-at-not-rfc3339": (
        ["--cpu", "1", "--owner-pod", "a", "--start-at", "tonight"],
        "error: --start-at: timestamp 'tonight' is not RFC 3339 (e.g. 2026-01-01T00:00:00Z)",
    ),
    "start-at-after-expires": (
        [
            "--cpu",
            "1",
            "--owner-pod",
            "a",
            "--start-at",
            "2099-01-02T00:00:00Z",
            "--expires",
            "2099-01-01T00:00:00Z",
        ],
        f"error: --start-at: {reservations.STARTS_AFTER_EXPIRY}",
    ),
    "expires-not-rfc3339": (
        ["--cpu", "1", "--owner-pod", "a", "--expires", "tomorrow"],
        "error: --expires: timestamp 'tomorrow' is not RFC 3339 (e.g. 2026-01-01T00:00:00Z)",
    ),
    "resource-without-quantity": (
        ["--resource", "example.com/fpga", "--owner-pod", "a"],
        "error: --resource: 'example.com/fpga' is not NAME=QUANTITY, e.g. example.com/fpga=1",
    ),
    "resource-given-twice": (
        ["--cpu", "1", "--resource", "cpu=2", "--owner-pod", "a"],
        "error: --resource: cpu is already given by --cpu",
    ),
    "controller-without-name": (
        ["--cpu", "1", "--owner-controller", "Job"],
        "error: --owner-controller: 'Job' is not KIND/NAME, e.g. Job/train or StatefulSet/workers",
    ),
    "selector-with-bad-value": (
        ["--cpu", "1", "--owner-selector", "app=tr@in"],
        "error: --owner-selector: 'tr@in' is not a valid label value: at most 63 letters, "
        "digits, '-', '_' and '.', starting and ending with a letter or digit",
    ),
    "selector-without-value": (
        ["--cpu", "1", "--owner-selector", "app"],
        "error: --owner-selector: 'app' is not KEY=VALUE, e.g. app=train,team=nlp",
    ),
    "pod-name-with-underscore": (
        ["--cpu", "1", "--owner-pod", "web_0"],
        "error: --owner-pod: 'web_0' is not a valid pod name: use lower-case letters, digits, "
        "'-' and '.', starting and ending with a letter or digit",
    ),
    "unknown-taint-effect": (
        ["--cpu", "1", "--owner-pod", "a", "--toleration", "dedicated=gpu:Never"],
        "error: --toleration: 'Never' is not a taint effect: use NoExecute, NoSchedule, "
        "PreferNoSchedule",
    ),
    "upper-case-name": (
        ["--cpu", "1", "--owner-pod", "a"],
        "error: NAME: 'R1' is not a valid reservation name: use lower-case letters, digits, "
        "'-' and '.', starting and ending with a letter or digit",
    ),
}


@pytest.mark.parametrize(("args", "line"), BAD_FLAGS.values(), ids=BAD_FLAGS.keys())
def test_bad_flags_fail_in_one_line_with_exit_1(
    args: list[str],
    line: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pathlib.Path,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    name = "R1" if "'R1'" in line else "r1"
    code, out, err = run_main([name, *args], capsys)
    assert (code, out, err) == (1, "", line + "\n")


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (["r1", "--cpu", "1", "--bogus"], "error: No such option '--bogus'"),
        (["--cpu", "1"], "error: Missing argument 'NAME'"),
        (["r1", "--cpu", "1", "-o", "wide"], "error: Invalid value for '-o' / '--output'"),
        (["r1", "--cpu", "1", "--dry-run=maybe"], "error: Invalid value for '--dry-run'"),
    ],
    ids=["unknown-flag", "missing-name", "unknown-output", "unknown-dry-run"],
)
def test_usage_errors_fail_in_one_line_with_exit_2(
    args: list[str], start: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(args, capsys)
    assert (code, out) == (2, "")
    assert err.startswith(start)
    assert err.endswith(" (see 'kubectl create reservation --help')\n")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("verbosity", "traceback"), [([], False), (["--v=2"], True)], ids=["quiet", "v2"]
)
def test_traceback_only_with_v(
    verbosity: list[str], traceback: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(["r1", "--cpu", "-1", "--owner-pod", "a", *verbosity], capsys)
    assert code == 1
    assert ("Traceback (most recent call last)" in err) is traceback
    assert (
        err.splitlines()[-1] == "error: --cpu: '-1' is negative: a reservation holds zero or more"
    )


def test_an_unexpected_failure_is_one_line_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_: typing.Any) -> typing.NoReturn:
        raise RuntimeError("boom")

    monkeypatch.setattr(clients, "connect", broken)
    code, out, err = run_main(["r1", "--cpu", "1", "--owner-pod", "a"], capsys)
    assert (code, out) == (1, "")
    assert err == "error: unexpected RuntimeError: boom (rerun with --v=1 for details)\n"


def test_client_dry_run_needs_no_cluster(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    code, out, err = run_main([*ISSUE_COMMAND, "--dry-run=client", "-o", "json"], capsys)
    assert (code, err) == (0, "")
    printed = reservations.Reservation.model_validate_json(out)
    assert printed.metadata.name == "r1"
    assert printed.spec.template.spec.containers[0].resources is not None


# Real kubectl against the emulator ----------------------------------------------------------


class Kubectl(typing.Protocol):
    def __call__(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]: ...


def install(emulator: testing.RunningEmulator, *, namespaces: tuple[str, ...] = ()) -> None:
    """Install Berth's CRDs and create ``namespaces``, with the Python client: the plugin is
    what is under test, and kubectl would send built-in objects as protobuf."""
    api = kubernetes.config.new_client_from_config(config_file=str(emulator.kubeconfig))
    try:
        extensions = kubernetes.client.ApiextensionsV1Api(api)
        for path in sorted((REPO / "crds").glob("*.yaml")):
            extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        core = kubernetes.client.CoreV1Api(api)
        for name in namespaces:
            core.create_namespace(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )
    finally:
        api.close()


def kubectl_with_plugin(emulator: testing.RunningEmulator) -> Kubectl:
    """Runs the real kubectl with the venv's bin (where the plugin is installed) on PATH."""

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        environment = emulator.env() if env is None else env
        bin_dir = str(pathlib.Path(sys.executable).parent)
        environment["PATH"] = bin_dir + os.pathsep + environment.get("PATH", "")
        return subprocess.run(
            [testing.kubectl_binary(), *args],
            capture_output=True,
            text=True,
            env=environment,
            timeout=60,
            check=False,
        )

    return run


@pytest.fixture(scope="module")
def cluster(module_emulator: testing.RunningEmulator) -> Iterator[testing.RunningEmulator]:
    install(module_emulator, namespaces=("team-a", "team-b"))
    yield module_emulator


@pytest.fixture(scope="module")
def kubectl_plugin(cluster: testing.RunningEmulator) -> Kubectl:
    return kubectl_with_plugin(cluster)


def created(cluster: testing.RunningEmulator) -> int:
    return cluster.count("POST", RESERVATIONS)


def test_kubectl_creates_a_valid_reservation(
    cluster: testing.RunningEmulator, kubectl_plugin: Kubectl
) -> None:
    result = kubectl_plugin("create", "reservation", *ISSUE_COMMAND)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "reservation.scheduling.berth.io/r1 created\n",
        "",
    )
    got = kubectl_plugin("get", "reservation", "r1", "-o", "yaml")
    assert got.returncode == 0, got.stderr
    stored = reservations.Reservation.model_validate(yaml.safe_load(got.stdout))
    assert stored.metadata.namespace == "default"
    spec = stored.to_api()["spec"]
    assert spec["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "4",
        "memory": "8Gi",
        "nvidia.com/gpu": "1",
    }
    assert spec["owners"] == [{"labelSelector": {"matchLabels": {"app": "train"}}}]
    assert spec["ttl"] == "2h"


def test_client_dry_run_prints_yaml_and_creates_nothing(
    cluster: testing.RunningEmulator, kubectl_plugin: Kubectl
) -> None:
    before = created(cluster)
    result = kubectl_plugin(
        "create", "reservation", "dry", *ISSUE_COMMAND[1:], "--dry-run=client", "-o", "yaml"
    )
    assert (result.returncode, result.stderr) == (0, "")
    printed = reservations.Reservation.model_validate(yaml.safe_load(result.stdout))
    assert printed.metadata.name == "dry"
    assert printed.spec.ttl is not None and str(printed.spec.ttl) == "2h"
    assert created(cluster) == before
    missing = kubectl_plugin("get", "reservation", "dry")
    assert missing.returncode == 1
    assert 'reservations.scheduling.berth.io "dry" not found' in missing.stderr


def test_server_dry_run_stores_nothing(
    cluster: testing.RunningEmulator, kubectl_plugin: Kubectl
) -> None:
    result = kubectl_plugin(
        "create", "reservation", "checked", "--cpu", "1", "--owner-pod", "a", "--dry-run=server"
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "reservation.scheduling.berth.io/checked created (server dry run)\n",
        "",
    )
    assert kubectl_plugin("get", "reservation", "checked").returncode == 1


KUBECTL_BAD_FLAGS = ("negative-cpu", "malformed-ttl", "no-owner")  # the issue's three


@pytest.mark.parametrize(
    ("args", "line"), [BAD_FLAGS[k] for k in KUBECTL_BAD_FLAGS], ids=KUBECTL_BAD_FLAGS
)
def test_kubectl_reports_bad_flags_in_one_line_with_exit_1(
    cluster: testing.RunningEmulator, kubectl_plugin: Kubectl, args: list[str], line: str
) -> None:
    before = created(cluster)
    result = kubectl_plugin("create", "reservation", "bad", *args)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", line + "\n")
    assert created(cluster) == before


def test_kubectl_reports_a_usage_error_with_exit_2(kubectl_plugin: Kubectl) -> None:
    result = kubectl_plugin("create", "reservation", "r1", "--cpus", "4")
    assert result.returncode == 2
    assert result.stderr.startswith("error: No such option '--cpus'")
    assert result.stderr.count("\n") == 1


def test_an_existing_name_reads_as_kubectl_already_exists(kubectl_plugin: Kubectl) -> None:
    args = ("create", "reservation", "twice", "--cpu", "1", "--owner-pod", "a")
    assert kubectl_plugin(*args).returncode == 0
    again = kubectl_plugin(*args)
    assert again.returncode == 1
    assert again.stderr.startswith("Error from server (AlreadyExists): ")
    assert '"twice" already exists' in again.stderr
    assert again.stderr.count("\n") == 1


def test_namespace_flag_and_output_name(kubectl_plugin: Kubectl) -> None:
    result = kubectl_plugin(
        "create", "reservation", "r-ns", "--cpu", "1", "--owner-pod", "a", "-n", "team-a",
        "-o", "name",
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (0, "reservation.scheduling.berth.io/r-ns\n")
    assert kubectl_plugin("get", "reservation", "r-ns", "-n", "team-a").returncode == 0


def test_kubeconfig_flag_and_context_namespace(
    cluster: testing.RunningEmulator, kubectl_plugin: Kubectl, tmp_path: pathlib.Path
) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    config["contexts"].append(
        {"name": "team-b", "context": dict(current["context"], namespace="team-b")}
    )
    kubeconfig = tmp_path / "two-contexts"
    kubeconfig.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in cluster.env().items() if k != "KUBECONFIG"}
    result = kubectl_plugin(
        "create", "reservation", "r-ctx", "--cpu", "1", "--owner-pod", "a",
        "--kubeconfig", str(kubeconfig), "--context", "team-b", env=env,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    assert kubectl_plugin("get", "reservation", "r-ctx", "-n", "team-b").returncode == 0
    unknown = kubectl_plugin(
        "create", "reservation", "r-ctx", "--cpu", "1", "--owner-pod", "a",
        "--kubeconfig", str(kubeconfig), "--context", "nowhere", env=env,
    )  # fmt: skip
    assert (unknown.returncode, unknown.stderr) == (
        1,
        f'error: context "nowhere" does not exist in {kubeconfig}\n',
    )


def test_missing_crds_are_named(emulator: testing.RunningEmulator) -> None:
    result = kubectl_with_plugin(emulator)(
        "create", "reservation", "r1", "--cpu", "1", "--owner-pod", "a"
    )
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "error: the server doesn't have a resource type \"reservations\": install Berth's CRDs "
        "(the Helm chart, or kubectl apply -f crds/)\n"
    )


def test_kubectl_passes_help_through(kubectl_plugin: Kubectl) -> None:
    result = kubectl_plugin("create", "reservation", "--help")
    assert result.returncode == 0
    assert "Usage: kubectl create reservation [OPTIONS] NAME" in result.stdout
    assert "Examples:" in result.stdout
    assert "--owner-selector" in result.stdout
