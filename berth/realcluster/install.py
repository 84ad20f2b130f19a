"""Berth installed into a local real control plane, as its chart installs it, run from here.

:func:`install` runs ``helm install`` of ``helm/berth`` (Helm as a library, helm-sdkpy) into the
control plane: the CRDs, the ServiceAccount, the ClusterRoles and Roles and their bindings, and
in admission mode the Mutating- and ValidatingWebhookConfiguration. The chart's Deployment is
then scaled to zero: there is no image to run here, Berth runs as a local process instead,
authenticated as the chart's ServiceAccount with a token the API server issued (TokenRequest),
so every request it makes is authorized by the chart's RBAC and nothing else. Each replica's
token is bound to a stand-in Pod named after its identity (:meth:`Installation.replica`,
:mod:`berth.realcluster.identities`), as the kubelet binds a replica pod's token: the chart's
leader fence lets only the pod holding the Lease write. In admission mode
the webhooks are pointed at the local process (a URL on 127.0.0.1 with a certificate of the
control plane's CA) instead of the in-cluster Service. :func:`upgrade` is ``helm upgrade`` of the
same release with other values, after which the same holds.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import pathlib
import typing

import berth
from berth.api import admissionregistration
from berth.realcluster import controlplane, identities, processes
from berth.util import extras

__all__ = [
    "CHART",
    "USER",
    "AdmissionValues",
    "ChartValues",
    "Installation",
    "WebhookValues",
    "install",
    "upgrade",
    "webhook_configuration",
]

CHART = pathlib.Path(berth.__file__).resolve().parent.parent / "helm" / "berth"
RELEASE = "berth"
NAMESPACE = "berth-system"
SERVICE_ACCOUNT = "berth"  # the chart's ServiceAccount for the release name "berth"
USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
"""The user name Berth's requests are authorized as (audit the control plane for it)."""
TOKEN_LIFETIME = "48h"
WEBHOOK_CONFIGURATION = f"{RELEASE}-admission"


class WebhookValues(typing.TypedDict, total=False):
    enabled: bool
    port: int
    failurePolicy: str  # Fail or Ignore
    timeoutSeconds: int


class AdmissionValues(typing.TypedDict, total=False):
    webhook: WebhookValues
    namespaces: str  # optIn or all
    bindTimeout: str  # a duration: 60s


class ChartValues(typing.TypedDict, total=False):
    """Values of Berth's chart (``helm/berth/values.yaml``, same names) that Berth sets when it
    installs it here; the chart's defaults hold the rest."""

    replicaCount: int
    mode: str  # scheduler or admission
    admission: AdmissionValues


@dataclasses.dataclass(frozen=True)
class Installation:
    """What a local Berth process needs to run as the installed chart's ServiceAccount."""

    kubeconfig: pathlib.Path  # authenticates as USER from no pod: the leader fence refuses
    # its writes (reads, and the Lease, pass)
    namespace: str
    mode: str
    webhook_cert: pathlib.Path | None = None
    webhook_key: pathlib.Path | None = None
    webhook_port: int = 0
    admin_kubeconfig: pathlib.Path | None = None  # to make replicas' identities with

    def replica(self, identity: str) -> pathlib.Path:
        """A kubeconfig for replica ``identity``: USER, from stand-in pod ``identity``."""
        admin = self.admin_kubeconfig
        if admin is None:
            raise ValueError("this installation has no administrator to make identities with")
        return identities.bound_kubeconfig(
            admin,
            namespace=self.namespace,
            service_account=SERVICE_ACCOUNT,
            pod=identity,
            to=admin.parent / f"berth-{identity}.kubeconfig",
            duration=TOKEN_LIFETIME,
        )

    def environment(
        self, *, http_port: int = 0, identity: str = "", kubeconfig: pathlib.Path | None = None
    ) -> dict[str, str]:
        """``berth run``'s settings for this installation, as ``BERTH_*`` variables; with an
        ``identity``, as that replica (:meth:`replica`, unless ``kubeconfig`` is given)."""
        if kubeconfig is None:
            kubeconfig = self.replica(identity) if identity else self.kubeconfig
        env = {
            "BERTH_KUBECONFIG": str(kubeconfig),
            "BERTH_NAMESPACE": self.namespace,
            "BERTH_MODE": self.mode,
            "BERTH_HTTP_HOST": "127.0.0.1",
            "BERTH_HTTP_PORT": str(http_port),
        }
        if identity:
            env["BERTH_LEADER_ELECTION__IDENTITY"] = identity
        if self.webhook_cert is not None and self.webhook_key is not None:
            env["BERTH_ADMISSION__WEBHOOK_HOST"] = "127.0.0.1"
            env["BERTH_ADMISSION__WEBHOOK_PORT"] = str(self.webhook_port)
            env["BERTH_ADMISSION__CERT_FILE"] = str(self.webhook_cert)
            env["BERTH_ADMISSION__KEY_FILE"] = str(self.webhook_key)
        else:
            env["BERTH_ADMISSION__WEBHOOK"] = "false"
        return env


def _helm() -> typing.Any:
    """helm-sdkpy, and the chart it installs, or a failure saying what is missing."""
    try:
        import helm_sdkpy
    except ImportError:
        raise processes.ComponentFailed(
            f"installing the chart needs helm-sdkpy, which Berth's [real] extra brings "
            f"({extras.install_hint('real')}); on Python 3.11 pip leaves it out of the extra: "
            f"{extras.HELM_ON_PYTHON_311}"
        ) from None
    if not (CHART / "Chart.yaml").is_file():
        raise processes.ComponentFailed(
            f"no Helm chart at {CHART}: the real control plane installs the chart of a checkout "
            "of Berth (pip install -e '.[real]' there)"
        )
    return helm_sdkpy


async def install(
    plane: controlplane.ControlPlane,
    *,
    mode: str = "scheduler",
    values: ChartValues | None = None,
) -> Installation:
    """``helm install berth helm/berth`` into ``plane`` and a local identity to run it as."""
    helm_sdkpy = _helm()
    chart_values = ChartValues(replicaCount=1, mode=mode)
    chart_values.update(values or {})
    configuration = helm_sdkpy.Configuration(
        namespace=NAMESPACE, kubeconfig=str(plane.admin_kubeconfig)
    )
    try:
        await helm_sdkpy.Install(configuration).run(
            RELEASE, str(CHART), values=chart_values, create_namespace=True, wait=False, timeout=120
        )
    except helm_sdkpy.HelmError as exc:
        raise processes.ComponentFailed(f"helm install of {CHART} failed: {exc}") from None
    plane.kubectl("scale", "deployment", RELEASE, "-n", NAMESPACE, "--replicas=0")
    token = plane.kubectl(
        "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, f"--duration={TOKEN_LIFETIME}"
    ).stdout.strip()
    kubeconfig = plane.token_kubeconfig(plane.directory / "berth.kubeconfig", token=token)
    admin = plane.admin_kubeconfig
    if mode != "admission":
        return Installation(kubeconfig, NAMESPACE, mode, admin_kubeconfig=admin)
    pair = plane.authority.serving("berth-webhook", hosts=["127.0.0.1"])
    port = processes.free_port()
    _point_webhooks_here(plane, port=port)
    return Installation(
        kubeconfig, NAMESPACE, mode, pair.cert, pair.key, port, admin_kubeconfig=admin
    )


async def upgrade(
    plane: controlplane.ControlPlane,
    installation: Installation,
    *,
    values: ChartValues,
) -> None:
    """``helm upgrade berth helm/berth`` with ``values`` (over the chart's defaults, in the
    installation's mode), its Deployment scaled to zero and its webhooks pointed here again."""
    helm_sdkpy = _helm()
    chart_values = ChartValues(replicaCount=1, mode=installation.mode)
    chart_values.update(values)
    configuration = helm_sdkpy.Configuration(
        namespace=NAMESPACE, kubeconfig=str(plane.admin_kubeconfig)
    )
    # Pointed here, the webhooks' clientConfig holds a url where the chart has a service: Helm's
    # three-way merge would keep both, which the API server refuses. Gone, Helm creates them
    # again as the chart renders them, and they are pointed here below.
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        plane.kubectl("delete", kind, WEBHOOK_CONFIGURATION, "--ignore-not-found")
    try:
        await helm_sdkpy.Upgrade(configuration).run(
            RELEASE, str(CHART), values=chart_values, wait=False, timeout=120
        )
    except helm_sdkpy.HelmError as exc:
        raise processes.ComponentFailed(f"helm upgrade of {CHART} failed: {exc}") from None
    plane.kubectl("scale", "deployment", RELEASE, "-n", NAMESPACE, "--replicas=0")
    if installation.mode == "admission":
        _point_webhooks_here(plane, port=installation.webhook_port)


def webhook_configuration(
    plane: controlplane.ControlPlane,
) -> admissionregistration.WebhookConfiguration | None:
    """The chart's MutatingWebhookConfiguration as it is now (None: not installed)."""
    result = plane.kubectl(
        "get", "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "-o", "json", check=False
    )
    if result.returncode != 0:
        return None
    config: admissionregistration.WebhookConfiguration = json.loads(result.stdout)
    return config


def _point_webhooks_here(plane: controlplane.ControlPlane, *, port: int) -> None:
    """Send the chart's webhooks (mutating and validating) to ``https://127.0.0.1:PORT`` with
    the plane's CA."""
    bundle = base64.b64encode(plane.authority.pem).decode()
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        found = plane.kubectl("get", kind, WEBHOOK_CONFIGURATION, "-o", "json", check=False)
        if found.returncode != 0:
            raise processes.ComponentFailed(
                f"the chart installed no {kind} {WEBHOOK_CONFIGURATION}"
            )
        config: admissionregistration.WebhookConfiguration = json.loads(found.stdout)
        for webhook in config.get("webhooks") or ():
            path = webhook["clientConfig"]["service"].get("path", "/")
            webhook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": bundle,
            }
        plane.kubectl("replace", "-f", "-", input=json.dumps(config))
