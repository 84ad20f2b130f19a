"""``berth demo``, ``berth up`` and ``berth bench e2e``, run as the console script.

We test these aspects:

- ``berth demo`` places and runs every example in under a minute and exits 0, printing the
  final tables (queues, PodGroups, reservations, pods with their nodes) and the operator's
  metrics (attempts, bindings, leader status);
- ``berth demo --timeout`` too short for the examples exits 1 saying it timed out;
- ``berth up`` writes its kubeconfig under the state directory (never the working directory)
  and prints it; ``kubectl describe pod`` of a pod that cannot fit shows one FailedScheduling
  Event with the reason;
- ``berth up`` prints how to point kubectl at it; kubectl then sees the simulated nodes and
  Berth's CRDs, a pod applied with kubectl is bound by Berth; SIGINT stops it with exit 0;
- ``berth bench e2e`` on a small cluster prints one JSON object with every pod bound;
- ``berth up --mode admission`` (nodes of a pool named ``n`` labelled ``gpu=yes``) prints which
  pods its webhook gates and who binds them; the printed next steps, run as printed, get a pod
  gated, admitted, and bound by the stand-in binder on the node Berth pinned; a gang of three
  with room for two stays gated, none started, each pod ``PodScheduled=False/SchedulingGated``;
- pods naming no queue run in ``default``, which ``kubectl get bq`` lists with its usage (the
  Queue object the leader creates) and ``kubectl berth queue default`` shows, saying that the
  pod waiting there is a group of one only ``--operator`` lists, and whose reason speaks of
  no gang and names no group; the same in admission mode with
  every namespace gated (``--admission-namespaces all``), where the waiting pod is held by
  Berth's gate and still counts as the queue's pending pod and demand, and the pods, created as
  soon as the next steps are printed, are not refused (the webhook already listens);
- ``--admission-namespaces`` outside admission mode is refused, saying so.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import time
import typing

import pytest

from berth.emulator import testing

BERTH = str(pathlib.Path(sys.executable).parent / "berth")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def environment(tmp_path: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env.pop("KUBECONFIG", None)
    return env | {"HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "cache")}


@pytest.mark.slow
def test_demo_runs_every_example_and_exits_0(tmp_path: pathlib.Path) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [BERTH, "demo"],
        cwd=tmp_path,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert seconds < 60
    out = done.stdout
    assert "done: every example placed and run" in out
    assert re.search(r"^\s*train\s+Finished\s+team-a\s+4\s", out, re.M)
    assert re.search(r"^\s*train-capacity\s+Succeeded\s+pool0-\d", out, re.M)
    for pod in ("train-0", "train-1", "train-2", "train-3", "trainer", "hello"):
        assert re.search(rf"^\s*{pod}\s+0/1\s+Completed\s+0\s+\S+\s+\S+\s+pool0-\d", out, re.M), pod
    assert 'berth_schedule_attempts_total{result="scheduled"} 6.0' in out
    assert "berth_leader_status 1.0" in out


@pytest.mark.slow
def test_demo_that_cannot_finish_in_time_exits_1(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [BERTH, "demo", "--timeout", "1", "--speedup", "0.01"],
        cwd=tmp_path,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "not finished" in done.stdout


@pytest.mark.slow
def test_up_serves_kubectl_and_schedules_until_interrupted(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "up.kubeconfig"
    env = environment(tmp_path)
    process = subprocess.Popen(
        [
            BERTH,
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            "2x cpu=4,memory=8Gi",
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert "berth up: Kubernetes API at http://127.0.0.1:" in first
        assert f"export KUBECONFIG={kubeconfig.resolve()}" in process.stdout.readline()
        kubectl_env = env | {"KUBECONFIG": str(kubeconfig)}

        def kubectl(*args: str, input: str | None = None) -> str:
            return subprocess.run(
                [testing.kubectl_binary(), *args],
                env=kubectl_env,
                input=input,
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout

        assert kubectl("get", "nodes", "-o", "name").split() == ["node/pool0-0", "node/pool0-1"]
        assert "podgroups.scheduling.berth.io" in kubectl("get", "crds", "-o", "name")
        kubectl("apply", "-f", str(ROOT / "examples" / "04-plain-pod"))
        deadline = time.monotonic() + 20
        node = ""
        while time.monotonic() < deadline and not node:
            node = kubectl("get", "pod", "hello", "-o", "jsonpath={.spec.nodeName}")
            time.sleep(0.1)
        assert node.startswith("pool0-")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.slow
def test_bench_e2e_binds_every_pod(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [BERTH, "bench", "e2e", "--nodes", "20", "--pods", "300"],
        cwd=tmp_path,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["scenario"] == "e2e"
    assert (result["nodes"], result["pods"], result["bound"], result["unbound"]) == (
        20,
        300,
        300,
        0,
    )
    assert result["pods_per_second"] > 0
    assert result["p50_ms"] <= result["p99_ms"]


HUGE = """
apiVersion: v1
kind: Pod
metadata: {name: huge-0}
spec:
  schedulerName: berth-scheduler
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "64"}}}]
"""


@pytest.mark.slow
def test_up_keeps_its_kubeconfig_in_the_state_directory_and_describe_shows_why(
    tmp_path: pathlib.Path,
) -> None:
    env = environment(tmp_path)
    process = subprocess.Popen(
        [BERTH, "up", "--nodes", "2x cpu=4,memory=8Gi", "--log-level", "warning"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        process.stdout.readline()
        exported = process.stdout.readline()
        kubeconfig = tmp_path / ".local" / "state" / "berth" / "up" / "kubeconfig"
        assert f"export KUBECONFIG={kubeconfig}" in exported
        assert kubeconfig.is_file()
        assert not list(tmp_path.glob("*kubeconfig*"))  # nothing left in the working directory
        kubectl_env = env | {"KUBECONFIG": str(kubeconfig)}

        def kubectl(*args: str, input: str | None = None) -> str:
            return subprocess.run(
                [testing.kubectl_binary(), *args],
                env=kubectl_env,
                input=input,
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout

        kubectl("apply", "-f", "-", input=HUGE)
        deadline = time.monotonic() + 20
        described = ""
        while time.monotonic() < deadline and "FailedScheduling" not in described:
            described = kubectl("describe", "pod", "huge-0")
            time.sleep(0.2)
        _, _, table = described.partition("\nEvents:")
        rows = [line for line in table.splitlines()[3:] if line.strip()]
        assert len(rows) == 1, described
        assert re.match(
            r"\s*Warning\s+FailedScheduling\s+\S+\s+berth-scheduler\s+0/2 nodes fit: "
            r"2 Insufficient cpu",
            rows[0],
        ), described
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


GANG_OF_THREE = """
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {name: trio}
spec: {minMember: 3, queue: team-a}
"""


def _trio_pod(index: int) -> str:
    return f"""
---
apiVersion: v1
kind: Pod
metadata:
  name: trio-{index}
  labels: {{scheduling.berth.io/pod-group: trio}}
spec:
  restartPolicy: Never
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "2500m"}}}}}}]
"""


@pytest.mark.slow
def test_up_in_admission_mode_gates_and_the_stand_in_binder_binds_what_berth_admits(
    tmp_path: pathlib.Path,
) -> None:
    """``berth up --mode admission`` on the embedded cluster, with the node spec of a pool
    named ``n`` whose label value is ``yes``; the printed next steps are run as printed."""
    kubeconfig = tmp_path / "admission.kubeconfig"
    env = environment(tmp_path)
    process = subprocess.Popen(
        [BERTH, "up", "--mode", "admission", "--kubeconfig", str(kubeconfig),
         "--nodes", "2x cpu=4 name=n label=gpu=yes", "--log-level", "warning"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        printed: list[str] = []
        for line in process.stdout:
            printed.append(line)
            if "Press Ctrl+C" in line:
                break
        text = "".join(printed)
        assert "Berth runs in admission mode" in text, text
        assert "every new pod of a namespace labelled scheduling.berth.io/admission=enabled" in (
            " ".join(text.split())
        )
        assert "Berth's stand-in binder (in place of kube-scheduler) binds them" in text
        assert f"export KUBECONFIG={kubeconfig.resolve()}" in text
        kubectl_env = env | {"KUBECONFIG": str(kubeconfig)}

        def kubectl(*args: str, input: str | None = None) -> str:
            return subprocess.run(
                [testing.kubectl_binary(), *args], env=kubectl_env, input=input,
                capture_output=True, text=True, check=True, timeout=30, cwd=ROOT,
            ).stdout  # fmt: skip

        assert kubectl("get", "nodes", "-l", "gpu=yes", "-o", "name").split() == [
            "node/n-0",
            "node/n-1",
        ]
        # The next steps, as a user would type them (from the checkout, for examples/).
        for line in printed:
            command = line.split("#")[0].strip()
            if command.startswith("kubectl "):
                kubectl(*shlex.split(command)[1:])
        deadline = time.monotonic() + 30
        hello: dict[str, typing.Any] = {}
        while time.monotonic() < deadline:
            hello = json.loads(kubectl("get", "pod", "hello", "-o", "json"))
            if hello["status"].get("phase") in ("Running", "Succeeded"):
                break
            time.sleep(0.2)
        assert hello["status"].get("phase") in ("Running", "Succeeded"), hello["status"]
        admitted = hello["metadata"]["annotations"]["scheduling.berth.io/admitted-node"]
        assert hello["spec"]["nodeName"] == admitted  # bound where Berth pinned it

        # A gang of three with room for two (4 cpu per node, 2.5 per pod: 7.5 of the 8 the
        # cluster has, but one a node): none starts.
        kubectl("apply", "-f", "-", input=GANG_OF_THREE + "".join(_trio_pod(i) for i in range(3)))
        deadline = time.monotonic() + 30
        reason = ""
        while time.monotonic() < deadline and reason != "NotEnoughResources":
            reason = kubectl(
                "get", "podgroup", "trio",
                "-o", "jsonpath={.status.conditions[?(@.type=='Scheduled')].reason}",
            )  # fmt: skip
            time.sleep(0.2)
        assert reason == "NotEnoughResources"
        pods = json.loads(kubectl("get", "pods", "-l", "scheduling.berth.io/pod-group=trio",
                                  "-o", "json"))["items"]  # fmt: skip
        assert len(pods) == 3
        for pod in pods:
            assert not pod["spec"].get("nodeName"), pod["metadata"]["name"]
            assert pod["spec"]["schedulingGates"] == [{"name": "scheduling.berth.io/admission"}]
            assert {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulingGated",
            }.items() <= next(
                c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"
            ).items()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


PLAIN_PODS = "".join(
    f"""
---
apiVersion: v1
kind: Pod
metadata:
  name: plain-{index}
  annotations: {{sim.berth.io/duration: 10m}}
spec:
  schedulerName: berth-scheduler
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""
    for index, cpu in ((0, "1"), (1, "1"), (2, "64"))
)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["scheduler", "admission"])
def test_the_default_queue_is_listed_with_its_usage(tmp_path: pathlib.Path, mode: str) -> None:
    """Pods naming no queue run in ``default``: ``kubectl get bq`` has its row (the Queue
    object the leader creates) and ``kubectl berth queue default`` its usage and line. In
    admission mode (every namespace gated), the pods name no scheduler, and the one Berth's gate
    holds counts as the queue's pending pod and demand, as in scheduler mode."""
    kubeconfig = tmp_path / "up.kubeconfig"
    env = environment(tmp_path)
    modes = {"scheduler": [], "admission": ["--mode", "admission", "--admission-namespaces", "all"]}
    plain = PLAIN_PODS
    if mode == "admission":
        plain = PLAIN_PODS.replace("  schedulerName: berth-scheduler\n", "")
        assert "schedulerName" not in plain
    process = subprocess.Popen(
        [BERTH, "up", "--kubeconfig", str(kubeconfig), "--nodes", "2x cpu=4,memory=8Gi",
         "--log-level", "warning", *modes[mode]],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "Press Ctrl+C" in line:
                break
        # The venv's bin first: `kubectl berth` is Berth's plugin.
        kubectl_env = env | {
            "KUBECONFIG": str(kubeconfig),
            "PATH": str(pathlib.Path(BERTH).parent) + os.pathsep + env.get("PATH", ""),
        }

        def kubectl(*args: str, input: str | None = None) -> str:
            return subprocess.run(
                [testing.kubectl_binary(), *args], env=kubectl_env, input=input,
                capture_output=True, text=True, check=True, timeout=30,
            ).stdout  # fmt: skip

        kubectl("apply", "-f", "-", input=plain)
        columns = (
            "custom-columns=NAME:.metadata.name,RUNNING:.status.runningPods,"
            "PENDING:.status.pendingPods"
        )
        deadline = time.monotonic() + 30
        row: list[str] = []
        while time.monotonic() < deadline and row != ["default", "2", "1"]:
            lines = kubectl("get", "bq", "-o", columns, "--no-headers").splitlines()
            row = next((line.split() for line in lines if line.startswith("default ")), [])
            time.sleep(0.2)
        assert row == ["default", "2", "1"], lines
        table = kubectl("get", "bq")
        # NAME STATE PARENT GUARANTEED ALLOCATED FAIRSHARE PENDING RUNNING: all 8 cpu its share.
        assert re.search(r"^default\s+Open\s+0\s+2 cpu\s+8 cpu\s+1\s+2\s", table, re.M), table
        line = " ".join(kubectl("berth", "queue", "default").split())
        assert "1 pending, 2 running" in line, line
        assert "allocated 2 cpu of fair share 8 cpu" in line, line
        # The one waiting is a group of one, not a PodGroup object: said, and where to look.
        assert "1 pod(s) pending as groups of one (no PodGroup): add --operator URL" in line, line
        if mode == "scheduler":
            # A pod alone is no gang, and its reason does not name the group of one it forms.
            path = "jsonpath={.status.conditions[?(@.type=='PodScheduled')].message}"
            deadline = time.monotonic() + 30
            why = ""
            while time.monotonic() < deadline and not why:
                why = kubectl("get", "pod", "plain-2", "-o", path)
                time.sleep(0.2)
            assert why == "0/2 nodes fit: 2 Insufficient cpu", why
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_admission_namespaces_needs_admission_mode() -> None:
    result = subprocess.run(
        [BERTH, "up", "--admission-namespaces", "all"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--admission-namespaces applies to --mode admission" in result.stderr
