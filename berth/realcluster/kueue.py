"""Kueue as one more component of a real control plane: its CRDs, webhooks and manager.

:class:`Kueue` installs what Kueue's kustomize default overlay installs, from the files
``hack/build-k8s --with kueue`` copied out of its module source (:func:`berth.realcluster.
binaries.extra`): the CRDs (with the conversion webhooks the overlay's patches turn on) and the
Mutating- and ValidatingWebhookConfiguration, keeping only the webhooks of Kueue's own kinds
and of the integrations it is started with (``batch/job``). Then it runs the manager as a local
process, as the plane runs kube-scheduler:

- it authenticates with a client certificate (user ``kueue``, group ``system:masters``: the
  chart's RBAC is not the point of a benchmark);
- the webhooks are pointed at ``https://127.0.0.1:PORT`` instead of the in-cluster Service.
  Kueue's internal certificate management stays on (without it Kueue insists on a metrics
  certificate under ``/etc/kueue``), and is handed a certificate it accepts: the Secret it
  keeps its CA in is written beforehand, an RSA CA named ``kueue-ca`` and a serving
  certificate for both the Service's DNS name (which Kueue checks) and 127.0.0.1 (which the
  API server dials); Kueue finds it valid, keeps it, and injects that CA into the webhooks;
- no leader election, the client rate limit raised (as kube-scheduler's in the benchmarks),
  the visibility API server off (it would need an APIService), no metrics server;
- :meth:`Kueue.stop` removes the webhook configurations before stopping the process (with
  ``failurePolicy: Fail`` a webhook without its server would refuse every Job of the cluster).

A failure names Kueue and its log (:class:`~berth.realcluster.processes.ComponentFailed`).
"""

from __future__ import annotations

import base64
import collections.abc
import datetime
import ipaddress
import json
import pathlib
import typing
import urllib.error
import urllib.request

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from berth.api import admissionregistration, core
from berth.api import objects as api_objects
from berth.realcluster import binaries, controlplane, processes

__all__ = [
    "NAMESPACE",
    "QUEUE_LABEL",
    "ClientConnection",
    "Configuration",
    "CustomResourceConversion",
    "CustomResourceDefinition",
    "CustomResourceDefinitionSpec",
    "InternalCertManagement",
    "Kueue",
    "WebhookConversion",
    "WebhookServer",
    "crds",
    "webhook_configurations",
]

NAMESPACE = "kueue-system"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that hands a Job to a LocalQueue."""
_GROUP = "kueue.x-k8s.io"
_SERVICE = "kueue-webhook-service"  # the names the kustomize overlay gives (prefix "kueue-")
_SECRET = "kueue-webhook-server-cert"
_CA_NAME = "kueue-ca"  # Kueue's cert rotator checks its CA under this name
_FRAMEWORK_RESOURCES = {"batch/job": ("batch", "jobs")}
_READY_TIMEOUT = 180.0


# A CustomResourceDefinition (apiextensions.k8s.io/v1): the fields written here; the rest (its
# versions' OpenAPI schemas) is carried along as Kueue's files hold it.


class WebhookConversion(typing.TypedDict):
    clientConfig: admissionregistration.WebhookClientConfig
    conversionReviewVersions: list[str]


class CustomResourceConversion(typing.TypedDict, total=False):
    strategy: typing.Required[str]  # None, Webhook
    webhook: WebhookConversion


class CustomResourceDefinitionSpec(typing.TypedDict, total=False):
    conversion: CustomResourceConversion


class CustomResourceDefinition(api_objects.KubeObject, total=False):
    spec: CustomResourceDefinitionSpec


# Kueue's configuration file (config.kueue.x-k8s.io/v1beta2): the fields written here.


class WebhookServer(typing.TypedDict):
    port: int
    host: str
    certDir: str


class InternalCertManagement(typing.TypedDict):
    enable: bool
    webhookServiceName: str
    webhookSecretName: str


class ClientConnection(typing.TypedDict):
    qps: float
    burst: int


class Configuration(typing.TypedDict, total=False):
    apiVersion: str
    kind: str
    namespace: str
    health: dict[str, str]  # {healthProbeBindAddress}
    metrics: dict[str, str]  # {bindAddress}
    webhook: WebhookServer
    leaderElection: dict[str, bool]  # {leaderElect}
    internalCertManagement: InternalCertManagement
    clientConnection: ClientConnection
    integrations: dict[str, list[str]]  # {frameworks}
    fairSharing: dict[str, list[str]]  # {preemptionStrategies}


def crds(directory: pathlib.Path, *, url: str, ca_bundle: bytes) -> list[CustomResourceDefinition]:
    """Kueue's CRDs from ``directory/config``, with the conversion webhook its kustomization
    patches in pointed at ``url`` (``https://127.0.0.1:PORT``)."""
    found: list[CustomResourceDefinition] = []
    for path in sorted((directory / "config" / "crd").glob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if d]
    patched = _patched_crds(directory / "config" / "crd-patches")
    bundle = base64.b64encode(ca_bundle).decode()
    for crd in found:
        if crd["metadata"]["name"] in patched:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": f"{url}/convert", "caBundle": bundle},
                    "conversionReviewVersions": ["v1"],
                },
            }
    if not found:
        raise processes.ComponentFailed(f"kueue: no CRDs in {directory / 'config' / 'crd'}")
    return found


def _patched_crds(patches: pathlib.Path) -> set[str]:
    """The CRDs whose conversion webhook the CRD kustomization turns on."""
    kustomization = yaml.safe_load((patches / "kustomization.yaml").read_text()) or {}
    names: set[str] = set()
    for patch in kustomization.get("patches") or ():
        file = patches / pathlib.PurePosixPath(str(patch.get("path", ""))).name
        if file.name.startswith("webhook_in_") and file.is_file():
            names.add(yaml.safe_load(file.read_text())["metadata"]["name"])
    return names


def webhook_configurations(
    directory: pathlib.Path,
    *,
    url: str,
    ca_bundle: bytes,
    frameworks: collections.abc.Collection[str],
) -> list[admissionregistration.WebhookConfiguration]:
    """Kueue's webhook configurations, named as its overlay names them, pointed at ``url``,
    with only the webhooks of its own kinds and of ``frameworks``."""
    wanted = {_FRAMEWORK_RESOURCES[f] for f in frameworks}
    path = directory / "config" / "webhook" / "manifests.yaml"
    bundle = base64.b64encode(ca_bundle).decode()
    configurations: list[admissionregistration.WebhookConfiguration] = []
    document: admissionregistration.WebhookConfiguration
    for document in yaml.safe_load_all(path.read_text()):
        if not document:
            continue
        kept = []
        for webhook in document.get("webhooks") or ():
            rules = webhook.get("rules") or ()
            covers = {
                (group, resource)
                for rule in rules
                for group in rule.get("apiGroups") or ()
                for resource in rule.get("resources") or ()
            }
            if any(group == _GROUP for group, _ in covers) or covers & wanted:
                service = webhook["clientConfig"]["service"]
                webhook["clientConfig"] = {
                    "url": url + service.get("path", "/"),
                    "caBundle": bundle,
                }
                kept.append(webhook)
        document["metadata"] = {"name": f"kueue-{document['metadata']['name']}"}
        document["webhooks"] = kept
        configurations.append(document)
    return configurations


def _certificates(to: pathlib.Path) -> dict[str, bytes]:
    """An RSA CA named ``kueue-ca`` and a serving certificate of it for the webhook Service's
    name and 127.0.0.1, as the files of Kueue's certificate Secret (PEM; PKCS#1 keys, as
    Kueue's cert rotator reads them)."""
    now = datetime.datetime.now(datetime.UTC)
    until = now + datetime.timedelta(days=365)  # the rotator renews what expires within 90
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _CA_NAME)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=True,
                key_cert_sign=True,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(_CA_NAME)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    dns = f"{_SERVICE}.{NAMESPACE}.svc"
    serving = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(until)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(dns), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )

    def pkcs1(private: rsa.RSAPrivateKey) -> bytes:
        return private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )

    files = {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "ca.key": pkcs1(ca_key),
        "tls.crt": serving.public_bytes(serialization.Encoding.PEM),
        "tls.key": pkcs1(key),
    }
    to.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        (to / name).write_bytes(files[name])
        (to / name).chmod(0o600)
    return files


class Kueue:
    """Kueue installed into ``plane`` and its manager running (see the module docstring)."""

    def __init__(
        self,
        plane: controlplane.ControlPlane,
        *,
        directory: pathlib.Path | None = None,
        frameworks: collections.abc.Sequence[str] = ("batch/job",),
        qps: float = 50.0,
        fair_sharing: bool = True,
    ) -> None:
        self.plane = plane
        try:
            self.directory = directory if directory is not None else binaries.extra("kueue")
        except binaries.BinariesMissing as missing:
            raise processes.ComponentFailed(f"kueue: {missing}") from None
        self.binary = self.directory / "bin" / "kueue"
        self.frameworks = tuple(frameworks)
        self.qps = qps
        self.fair_sharing = fair_sharing
        self.home = plane.directory / "kueue"
        self.webhook_port = processes.free_port()
        self.probe_port = processes.free_port()
        self.visibility_port = processes.free_port()
        self.process: processes.Process | None = None
        self._installed: list[admissionregistration.WebhookConfiguration] = []

    @property
    def log(self) -> pathlib.Path:
        return self.plane.log("kueue")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    def start(self) -> Kueue:
        """Install the CRDs, the certificate Secret and the webhooks, start the manager and
        wait until its webhooks answer; on failure, undo what was done and say why."""
        try:
            self._install()
            self._run()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Remove the webhooks (they would refuse Jobs without the manager), stop it."""
        for configuration in self._installed:
            self.plane.kubectl(
                "delete",
                configuration["kind"].lower(),
                configuration["metadata"]["name"],
                "--ignore-not-found",
                check=False,
            )
        self._installed = []
        if self.process is not None:
            self.plane.retire("kueue")

    def check(self) -> None:
        if self.process is None:
            raise processes.ComponentFailed("kueue was never started")
        self.process.check()

    # ----- the steps -----------------------------------------------------------------------

    def _install(self) -> None:
        if not self.binary.is_file():
            raise processes.ComponentFailed(f"kueue: no manager binary at {self.binary}")
        certificates = _certificates(self.home / "certs")
        ca = certificates["ca.crt"]
        documents = crds(self.directory, url=self.url, ca_bundle=ca)
        self._kubectl_apply(documents, what="its CRDs")
        names = [f"crd/{d['metadata']['name']}" for d in documents]
        result = self.plane.kubectl(
            "wait", "--for=condition=Established", "--timeout=120s", *names, check=False
        )
        if result.returncode != 0:
            raise processes.ComponentFailed(
                f"kueue: its CRDs did not become Established: {result.stderr.strip()}"
            )
        self.plane.kubectl("create", "namespace", NAMESPACE, check=False)  # exists on a re-install
        secret: core.Secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": _SECRET, "namespace": NAMESPACE},
            "data": {k: base64.b64encode(v).decode() for k, v in certificates.items()},
        }
        configurations = webhook_configurations(
            self.directory, url=self.url, ca_bundle=ca, frameworks=self.frameworks
        )
        self._kubectl_apply([secret], what="its certificate Secret")
        self._installed = configurations
        self._kubectl_apply(configurations, what="its webhook configurations")

    def _kubectl_apply(
        self, documents: collections.abc.Sequence[api_objects.KubeObject], *, what: str
    ) -> None:
        # Server-side: Kueue's CRDs are too large for the last-applied annotation.
        result = self.plane.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=berth-realcluster",
            "-f",
            "-",
            input=yaml.safe_dump_all(documents, sort_keys=False),
            check=False,
        )
        if result.returncode != 0:
            raise processes.ComponentFailed(
                f"kueue: installing {what} failed: {result.stderr.strip() or result.stdout}"
            )

    def _configuration(self) -> Configuration:
        config: Configuration = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.probe_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {
                "port": self.webhook_port,
                "host": "127.0.0.1",
                "certDir": str(self.home / "certs"),
            },
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {
                "enable": True,
                "webhookServiceName": _SERVICE,
                "webhookSecretName": _SECRET,
            },
            "clientConnection": {"qps": self.qps, "burst": max(100, int(2 * self.qps))},
            "integrations": {"frameworks": list(self.frameworks)},
        }
        if self.fair_sharing:
            # Kueue's documented strategies; they only matter where a ClusterQueue allows
            # preemption.
            config["fairSharing"] = {
                "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
            }
        return config

    def _run(self) -> None:
        config = self.home / "configuration.yaml"
        config.write_text(yaml.safe_dump(self._configuration(), sort_keys=False))
        kubeconfig = self.plane.kubeconfig_for("kueue", user="kueue", groups=["system:masters"])
        self.process = self.plane.spawn(
            "kueue",
            [
                str(self.binary),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                "--feature-gates=VisibilityOnDemand=false",
                f"--visibility-server-port={self.visibility_port}",
            ],
        )

    def _wait_ready(self) -> None:
        assert self.process is not None
        processes.wait_until(
            f"kueue's readiness (log: {self.log})",
            lambda: _http_ok(f"http://127.0.0.1:{self.probe_port}/readyz"),
            timeout=_READY_TIMEOUT,
            watch=[self.process],
        )
        # Ready means its webhook server listens; a Job it suspends proves the API server
        # reaches it with the certificate it was given.
        processes.wait_until(
            f"kueue's job webhook (log: {self.log})",
            self._suspends_jobs,
            timeout=_READY_TIMEOUT,
            watch=[self.process],
            interval=1.0,
        )

    def _suspends_jobs(self) -> bool:
        if "batch/job" not in self.frameworks:
            return True
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "kueue-probe",
                "namespace": "default",
                "labels": {QUEUE_LABEL: "probe"},
            },
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    }
                }
            },
        }
        result = self.plane.kubectl(
            "create",
            "--dry-run=server",
            "-o",
            "json",
            "-f",
            "-",
            input=json.dumps(job),
            check=False,
        )
        if result.returncode != 0:
            return False
        return bool(json.loads(result.stdout).get("spec", {}).get("suspend"))


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
