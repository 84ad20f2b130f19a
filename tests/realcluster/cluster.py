"""The real-cluster tests' handle: the control plane, Berth installed into it, Berth processes.

- :class:`RealCluster` wraps :class:`berth.realcluster.controlplane.ControlPlane` with the real
  kubectl (a failed call fails the test with its output), bounded ``kubectl wait``\\ s and the
  audit log.
- :class:`BerthProcess` is ``berth run`` as a child process, authenticated as the chart's
  ServiceAccount from a stand-in pod named after its identity (:mod:`berth.realcluster.install`:
  the chart's leader fence lets only the Lease holder's pod write), logging to the control
  plane's logs folder.
  :meth:`RealCluster.berth` starts one; every one started is stopped when the test ends;
  :meth:`BerthProcess.keep_running` restarts one that exited, as a Deployment would.
- In admission mode the chart's MutatingWebhookConfiguration sends pods to the running Berth;
  in scheduler mode it is removed, as ``helm upgrade --set mode=scheduler`` would.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import sys
import typing
import urllib.error
import urllib.request
import uuid

import pytest
import yaml

from berth.realcluster import audit, controlplane, identities, install, processes

__all__ = ["WAIT", "BerthProcess", "RealCluster"]

WAIT = "120s"
"""The bound of every wait on the cluster."""

Obj = dict[str, typing.Any]


class BerthProcess:
    """One ``berth run`` replica (see the module docstring)."""

    def __init__(
        self,
        cluster: RealCluster,
        *,
        mode: str,
        identity: str,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.identity = identity
        self.http_port = processes.free_port()
        self._cluster = cluster
        own = (settings or {}).get("BERTH_KUBECONFIG")
        env = dict(os.environ)
        env.update(
            cluster.installation.environment(
                http_port=self.http_port,
                identity=identity,
                kubeconfig=pathlib.Path(own) if own else None,
            )
        )
        env["BERTH_MODE"] = mode
        if mode != "admission":
            for key in [k for k in env if k.startswith("BERTH_ADMISSION__")]:
                del env[key]
            env["BERTH_ADMISSION__WEBHOOK"] = "false"
        env.update(settings or {})
        env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        berth = pathlib.Path(sys.executable).parent / "berth"
        self.process = processes.Process(
            f"berth ({identity})",
            [str(berth), "run", "--log-level", "info"],
            log=cluster.plane.log(f"berth-{identity}"),
            env=env,
        )

    def start(self) -> BerthProcess:
        self.process.start()
        processes.wait_until(
            f"berth {self.identity}'s HTTP server",
            self._healthy,
            timeout=60.0,
            watch=[self.process],
        )
        return self

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.http_port}/healthz", timeout=2.0
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def keep_running(self) -> bool:
        """Start the replica again if it exited, as its Deployment's kubelet would
        (``restartPolicy: Always``); say whether it did.

        A leader whose renewals miss the deadline exits so that its pod restarts as a
        follower; on a loaded machine that happens, and without the restart no replica is left.
        """
        if self.process.running():
            return False
        self.process.start()
        return True

    def stop(self) -> None:
        self.process.stop()
        # Its stand-in pod (the identity its token is bound to) goes with it.
        identities.remove(
            self._cluster.plane.admin_kubeconfig,
            namespace=self._cluster.installation.namespace,
            pod=self.identity,
        )


@dataclasses.dataclass
class RealCluster:
    """The session's control plane with Berth's chart installed (see the module docstring)."""

    plane: controlplane.ControlPlane
    installation: install.Installation
    webhooks: Obj  # the chart's MutatingWebhookConfiguration, pointed at 127.0.0.1
    started: list[BerthProcess] = dataclasses.field(default_factory=list)
    namespaces: list[str] = dataclasses.field(default_factory=list)

    # ----- kubectl --------------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 180.0
    ) -> typing.Any:
        # The venv's bin first: `kubectl berth` and `kubectl create reservation` are Berth's.
        env = dict(os.environ)
        env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        result = self.plane.kubectl(*args, input=input, check=False, timeout=timeout, env=env)
        if check and result.returncode != 0:
            pytest.fail(
                f"kubectl {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def json(self, *args: str) -> Obj:
        decoded: Obj = json.loads(self.kubectl(*args, "-o", "json").stdout)
        return decoded

    def create(self, *documents: Obj, namespace: str | None = None) -> None:
        scope = ["-n", namespace] if namespace else []
        self.kubectl("create", *scope, "-f", "-", input=yaml.safe_dump_all(documents))

    def wait(self, what: str, *, jsonpath: str, value: str, namespace: str | None = None) -> None:
        scope = ["-n", namespace] if namespace else []
        self.kubectl(
            "wait", *scope, what, f"--for=jsonpath={jsonpath}={value}", f"--timeout={WAIT}"
        )

    def namespace(self, *, per_test: bool = True) -> str:
        """A fresh namespace whose default ServiceAccount exists (pods may be created).

        ``per_test`` ones are deleted when the test ends (:meth:`clean_up`).
        """
        name = f"t-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", name)
        if per_test:
            self.namespaces.append(name)
        processes.wait_until(
            f"ServiceAccount {name}/default",
            lambda: (
                self.plane.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0
            ),
            timeout=60.0,
            watch=list(self.plane.processes.values()),
        )
        return name

    def pods(self, namespace: str) -> list[Obj]:
        items: list[Obj] = self.json("get", "pods", "-n", namespace)["items"]
        return items

    # ----- Berth ----------------------------------------------------------------------------

    def berth(
        self, *, mode: str = "scheduler", identity: str = "", settings: dict[str, str] | None = None
    ) -> BerthProcess:
        """Start ``berth run`` in ``mode`` (the webhooks follow the mode); ``settings`` are
        more ``BERTH_*`` variables."""
        self.use_webhooks(mode == "admission")
        replica = BerthProcess(
            self,
            mode=mode,
            identity=identity or f"berth-{uuid.uuid4().hex[:6]}",
            settings=settings,
        )
        self.started.append(replica)
        return replica.start()

    def use_webhooks(self, enabled: bool) -> None:
        present = install.webhook_configuration(self.plane) is not None
        if enabled and not present:
            config = {k: v for k, v in self.webhooks.items() if k != "status"}
            config["metadata"] = {
                k: v
                for k, v in config["metadata"].items()
                if k in ("name", "labels", "annotations")
            }
            self.kubectl("create", "-f", "-", input=json.dumps(config))
        elif not enabled and present:
            self.kubectl("delete", "mutatingwebhookconfiguration", install.WEBHOOK_CONFIGURATION)

    def stop_berth(self) -> None:
        while self.started:
            self.started.pop().stop()

    def clean_up(self) -> None:
        """Stop Berth and delete the test's namespaces (their pods leave their nodes)."""
        self.stop_berth()
        while self.namespaces:
            self.kubectl("delete", "namespace", self.namespaces.pop(), "--wait=false")

    def leader(self) -> str:
        lease = self.json("get", "lease", "berth-scheduler", "-n", install.NAMESPACE)
        return str(lease["spec"].get("holderIdentity") or "")

    # ----- the audit log --------------------------------------------------------------------

    def audited(self) -> list[audit.Request]:
        return audit.read(self.plane.audit_log)

    def refused(self) -> list[audit.Request]:
        """Berth's requests the API server refused (401/403), in the order made."""
        return audit.refused(self.audited(), user=install.USER)
