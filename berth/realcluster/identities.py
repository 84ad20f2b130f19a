"""Replica identities the API server authenticates: a stand-in Pod and a token bound to it.

In a deployment every Berth replica is a pod of the chart's Deployment, and the kubelet mounts
into it a ServiceAccount token bound to that pod: authenticating it, the API server names the
pod in the user's extra (``authentication.kubernetes.io/pod-name``), which is what the chart's
leader fence (``helm/berth/templates/leader-fence.yaml``) compares with the Lease holder. A
Berth process run from here has no kubelet, so :func:`bound_kubeconfig` does what the kubelet
does: it creates a stand-in Pod of the ServiceAccount, named after the replica's identity, and
requests a token bound to it (a TokenRequest with the Pod as its bound object). The stand-in
never runs — a scheduling gate keeps it off every node — it only gives the process a pod the
API server can vouch for. Deleting it (:func:`remove`) invalidates the token.

Everything goes through the real ``kubectl`` as the administrator, so this works against any
cluster the admin kubeconfig reaches.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import yaml

from berth.api import core
from berth.realcluster import controlplane, processes

__all__ = ["GATE", "bound_kubeconfig", "remove", "stand_in"]

GATE = "realcluster.berth.io/stand-in"
"""Keeps a stand-in Pod unscheduled: it exists for its identity only."""

_LABELS = {"app.kubernetes.io/part-of": "berth", "app.kubernetes.io/component": "stand-in"}


def stand_in(pod: str, *, namespace: str, service_account: str) -> core.Pod:
    """The stand-in Pod for replica ``pod`` of ``service_account``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": namespace, "labels": dict(_LABELS)},
        "spec": {
            "serviceAccountName": service_account,
            "automountServiceAccountToken": False,
            "schedulingGates": [{"name": GATE}],
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "berth", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def _kubectl(
    admin: pathlib.Path, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [controlplane.find_kubectl(), *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120.0,
        check=False,
        env={**os.environ, "KUBECONFIG": str(admin)},
    )
    if result.returncode != 0:
        raise processes.ComponentFailed(
            f"kubectl {' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}"
        )
    return result


def bound_kubeconfig(
    admin: pathlib.Path,
    *,
    namespace: str,
    service_account: str,
    pod: str,
    to: pathlib.Path,
    duration: str = "48h",
) -> pathlib.Path:
    """A kubeconfig authenticating as ``service_account`` from stand-in pod ``pod`` (created
    afresh, so an earlier token for a pod of that name no longer works); written to ``to``."""
    remove(admin, namespace=namespace, pod=pod)
    body = stand_in(pod, namespace=namespace, service_account=service_account)
    _kubectl(admin, "create", "-f", "-", input=json.dumps(body))  # JSON: no YAML 1.1 booleans
    token = _kubectl(
        admin,
        "create",
        "token",
        service_account,
        "-n",
        namespace,
        "--bound-object-kind=Pod",
        f"--bound-object-name={pod}",
        f"--duration={duration}",
    ).stdout.strip()
    config = yaml.safe_load(admin.read_text())
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    current = contexts.get(config.get("current-context") or "") or next(iter(contexts.values()))
    cluster = next(c for c in config["clusters"] if c["name"] == current["cluster"])
    written = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": pod, "user": {"token": token}}],
        "contexts": [{"name": pod, "context": {"cluster": cluster["name"], "user": pod}}],
        "current-context": pod,
    }
    to.write_text(yaml.safe_dump(written, sort_keys=False))
    to.chmod(0o600)
    return to


def remove(admin: pathlib.Path, *, namespace: str, pod: str) -> None:
    """Delete stand-in ``pod`` (if there is one) and wait until it is gone."""
    _kubectl(admin, "delete", "pod", pod, "-n", namespace, "--ignore-not-found")
