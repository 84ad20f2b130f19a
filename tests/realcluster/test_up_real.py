"""``berth up --real`` as a user runs it: a real control plane, the examples, Ctrl+C.

We test these aspects:
- it prints the administrator's kubeconfig, under its state directory, for the real kubectl;
- ``kubectl apply`` of every example folder reaches what the README promises: the queues get
  their status, the gang of four runs, the reservation is taken by its owner (Succeeded) on its
  node, and the plain pod runs;
- the API server's audit log shows one watch per kind from Berth's replica: every kind the
  scheduler follows is watched (the informers' kinds, Berth's own through Kopf, CRDs), and no
  two watches of one kind are ever open at once;
- Ctrl+C stops Berth and every component of the control plane, and the command exits 0;
- installed as the README's install table says (a fresh virtualenv, the checkout with its
  ``[real]`` extra), ``berth up --real --mode admission --kubeconfig F`` with nodes of a pool
  named ``n`` labelled ``gpu=yes`` (YAML 1.1 booleans, were they written bare) writes F, prints
  admission mode's next steps, and those steps, run as printed, get a pod gated, admitted and
  bound by kube-scheduler on the node Berth pinned;
- ``berth up --real --mode admission --admission-namespaces all`` (the chart's
  ``admission.namespaces=all``) prints each step of its start-up, and says in its next steps
  that it gates every namespace's pods;
  plain pods (no label, no scheduler named) in the ``default`` namespace are then gated and
  admitted by Berth in the ``default`` queue, whose usage ``kubectl get bq`` (its row, from the
  Queue the leader creates) and ``kubectl berth queue default`` show: 2 running, 1 pending;
- options of the embedded cluster that mean nothing with ``--real`` are refused, saying why, and
  ``--autoscale`` (Karpenter) without it.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess

import pytest

from berth.realcluster import audit, binaries, install
from tests.packaging import venvs
from tests.realcluster import cluster, upreal

pytestmark = pytest.mark.realcluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
WATCHED = {
    # The informers'
    "pods", "nodes", "namespaces", "priorityclasses", "persistentvolumeclaims",
    "persistentvolumes", "storageclasses", "csinodes",
    # The informers' DRA kinds (the real control plane serves resource.k8s.io/v1)
    "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates",
    # The leader's Kopf: Berth's own kinds, and the CRDs
    "queues", "podgroups", "reservations", "customresourcedefinitions",
}  # fmt: skip


def _alive_under(directory: pathlib.Path) -> list[str]:
    """Command lines of running processes that mention ``directory`` (its components)."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(directory) in cmdline:
            found.append(cmdline)
    return found


@pytest.mark.timeout(300)
def test_up_real_runs_the_examples_then_stops_everything(tmp_path: pathlib.Path) -> None:
    state = tmp_path / "berth" / "real-cluster"
    nodes = "8x cpu=16,memory=64Gi,nvidia.com/gpu=4"
    with upreal.started(tmp_path / "berth", "--nodes", nodes, until="export KUBECONFIG=") as up:
        printed = up.printed
        kubeconfig = printed[-1].split("export KUBECONFIG=", 1)[1].split("#")[0].strip()
        assert kubeconfig == str(state / "admin.kubeconfig")
        assert any("Berth runs as system:serviceaccount:berth-system:berth" in x for x in printed)
        for folder in sorted(p for p in (ROOT / "examples").iterdir() if p.name[:2].isdigit()):
            up.out("apply", "-f", str(folder))
        wait = f"--timeout={cluster.WAIT}"
        up.until_says("get", "queue/research", "-o", "jsonpath={.status.children}", says="team-a")
        for i in range(4):
            up.out("wait", f"pod/train-{i}", "--for=jsonpath={.status.phase}=Running", wait)
        up.out("wait", "reservation/train-capacity", "--for=jsonpath={.status.phase}=Succeeded",
               wait)  # fmt: skip
        node = up.out("get", "reservation/train-capacity", "-o", "jsonpath={.status.nodeName}")
        assert up.out("get", "pod/trainer", "-o", "jsonpath={.spec.nodeName}") == node
        up.out("wait", "pod/hello", "--for=jsonpath={.status.phase}=Running", wait)
        watched = audit.watches(state / "logs" / "audit.log", user=install.USER)
        assert audit.overlapping(watched) == {}
        assert {w.resource for w in watched} >= WATCHED, sorted({w.resource for w in watched})
        assert _alive_under(state)
        up.stop()
        assert _alive_under(state) == []


PLAIN_PODS = "".join(
    f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: plain-{index}}}
spec:
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""
    for index, cpu in ((0, "1"), (1, "1"), (2, "64"))
)


@pytest.mark.timeout(300)
def test_up_real_gating_every_namespace_shows_the_default_queues_usage(
    tmp_path: pathlib.Path,
) -> None:
    kubeconfig = tmp_path / "real.kubeconfig"
    with upreal.started(
        tmp_path / "berth", "--mode", "admission", "--admission-namespaces", "all",
        "--kubeconfig", str(kubeconfig), "--nodes", "2x cpu=4,memory=8Gi",
        until="Press Ctrl+C", kubeconfig=kubeconfig,
    ) as up:  # fmt: skip
        printed = up.printed
        text = " ".join("".join(printed).split())
        # Each step of its start-up (docs/real-cluster.md), then what to type next.
        steps = [line.removeprefix("berth up --real: ").strip() for line in printed]
        started = ("starting etcd", "starting kube-apiserver", "installing Berth's chart")
        for step in (*started, "waiting for the nodes to be Ready"):
            assert step in steps, printed
        assert "Berth's webhook gates every new pod of every namespace but kube-system" in text
        assert "kube-scheduler binds them" in text
        up.out("apply", "-f", "-", input=PLAIN_PODS)
        wait = f"--timeout={cluster.WAIT}"
        for name in ("plain-0", "plain-1"):
            up.out("wait", f"pod/{name}", "--for=jsonpath={.status.phase}=Running", wait)
            pod = json.loads(up.out("get", f"pod/{name}", "-o", "json"))
            # Gated by the webhook, admitted by Berth, bound by kube-scheduler where pinned.
            admitted = pod["metadata"]["annotations"]["scheduling.berth.io/admitted-node"]
            assert pod["spec"]["nodeName"] == admitted
            assert pod["spec"]["schedulerName"] == "default-scheduler"
        too_big = json.loads(up.out("get", "pod/plain-2", "-o", "json"))
        assert too_big["spec"]["schedulingGates"] == [{"name": "scheduling.berth.io/admission"}]
        # The leader creates the Queue default; kubectl wait fails at once on an object that is
        # not there yet, so first wait for it to exist.
        up.out("wait", "queue/default", "--for=create", wait)
        up.out("wait", "queue/default", "--for=jsonpath={.status.runningPods}=2", wait)
        up.out("wait", "queue/default", "--for=jsonpath={.status.pendingPods}=1", wait)
        table = up.out("get", "bq")
        # NAME STATE PARENT GUARANTEED ALLOCATED FAIRSHARE PENDING RUNNING: all 8 cpu its share.
        assert re.search(r"^default\s+Open\s+0\s+2 cpu\s+8 cpu\s+1\s+2\s", table, re.M), table
        line = " ".join(up.out("berth", "queue", "default").split())
        assert "1 pending, 2 running" in line, line
        assert "allocated 2 cpu of fair share 8 cpu" in line, line
        up.stop()


def test_up_real_refuses_options_of_the_embedded_cluster() -> None:
    result = subprocess.run(
        [upreal.BERTH, "up", "--real", "--speedup", "5"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--speedup does not apply to --real: KWOK runs pods in real time" in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_up_real_from_a_fresh_install_in_admission_mode_writes_the_kubeconfig_asked(
    tmp_path: pathlib.Path,
) -> None:
    try:
        binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    (row,) = [s for s in venvs.documented_sets() if "berth up --real" in s.commands]
    venv = venvs.editable_venv(tmp_path / "install", row)
    kubeconfig = tmp_path / "mine.kubeconfig"
    # The virtualenv's home is fresh: point it at the binaries this machine has (never build).
    found = {k: os.environ[k] for k in ("BERTH_K8S_BIN", "KUBEBUILDER_ASSETS") if k in os.environ}
    cache = os.environ.get("BERTH_CACHE") or str(pathlib.Path.home() / ".cache" / "berth")
    with upreal.started(
        tmp_path / "berth", "--mode", "admission", "--kubeconfig", str(kubeconfig),
        "--nodes", "2x cpu=4 name=n label=gpu=yes", until="Press Ctrl+C",
        berth=venv.bin("berth"), env=venv.env(BERTH_CACHE=cache, **found), cwd=venvs.REPO,
        kubeconfig=kubeconfig, kubectl=venv.bin("kubectl"),
    ) as up:  # fmt: skip
        printed = up.printed
        text = "".join(printed)
        assert "in admission mode" in text
        assert "and kube-scheduler binds them" in " ".join(text.split())
        assert f"export KUBECONFIG={kubeconfig.resolve()}" in text
        assert kubeconfig.stat().st_mode & 0o077 == 0  # the administrator's key: owner only
        assert up.out("get", "nodes", "-l", "gpu=yes", "-o", "name").split() == [
            "node/n-0",
            "node/n-1",
        ]
        pool = up.out(
            "get", "node", "n-0", "-o", "jsonpath={.metadata.labels.sim\\.berth\\.io/pool}"
        )
        assert pool == "n"
        for line in printed:
            command = line.split("#")[0].strip()
            if command.startswith("kubectl "):
                up.out(*shlex.split(command)[1:])
        up.out("wait", "pod/hello", "--for=jsonpath={.spec.nodeName}", f"--timeout={cluster.WAIT}")
        hello = json.loads(up.out("get", "pod/hello", "-o", "json"))
        admitted = hello["metadata"]["annotations"]["scheduling.berth.io/admitted-node"]
        assert hello["spec"]["nodeName"] == admitted
        up.stop()


def test_autoscale_needs_the_real_control_plane() -> None:
    result = subprocess.run(
        [upreal.BERTH, "up", "--autoscale"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--autoscale applies to --real" in result.stderr
