"""``berth up --real``: Berth on a real control plane built from Kubernetes' own Go modules.

Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK's simulated nodes
(:mod:`berth.realcluster`) in ``real-cluster`` under ``berth up``'s state directory, installs
Berth's chart into it (CRDs, the ServiceAccount and its RBAC), prints the administrator's
kubeconfig for the real ``kubectl`` (copied to ``--kubeconfig`` when given) and what to type
next for the mode chosen (the same as ``berth up``'s), and runs the operator in this process as
the chart's ServiceAccount until interrupted; then stops every component. The operator exits
when it loses its Lease (as kube-scheduler does: a kube-apiserver restart is enough); here it is
started again, as a kubelet restarts a container, after a backoff that doubles from
``RESTART_BACKOFF`` to ``RESTART_BACKOFF_MAX`` (back to the start once it ran a minute): the
local cluster keeps running. The binaries come from
``BERTH_K8S_BIN``, ``KUBEBUILDER_ASSETS`` or the build cache, and are built with
``hack/build-k8s`` when a checkout has none yet. With ``--autoscale``, Karpenter runs beside
them (:mod:`berth.realcluster.karpenter`; built with ``hack/build-k8s --with karpenter`` when
missing) with a NodePool of CPU and GPU machines.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import pathlib
import shutil
import time

import click

import berth
from berth.cli import signals, up_steps
from berth.emulator import kubelets
from berth.operator import main, scheduling, settings
from berth.realcluster import binaries, controlplane, install, karpenter, processes
from berth.util import wakeups

__all__ = ["RESTART_BACKOFF", "RESTART_BACKOFF_MAX", "run_real"]

RESTART_BACKOFF = 1.0
"""Seconds before the operator is started again after its first exit."""
RESTART_BACKOFF_MAX = 16.0
"""The longest wait before the operator is started again (a kubelet's is 5 minutes; a local
cluster wants its scheduler back sooner)."""
_RAN_WELL = 60.0  # seconds: an operator that ran this long starts the backoff afresh


def _binaries() -> binaries.Binaries:
    try:
        return binaries.find()
    except binaries.BinariesMissing as missing:
        checkout = pathlib.Path(berth.__file__).resolve().parent.parent
        if not (checkout / "hack" / "build-k8s").is_file():
            raise click.ClickException(str(missing)) from None
        click.echo("berth up --real: no control-plane binaries yet; building them (hack/build-k8s)")
        try:
            return binaries.build(checkout)
        except binaries.BinariesMissing as failed:
            raise click.ClickException(str(failed)) from None


def _karpenter() -> pathlib.Path:
    try:
        return binaries.extra("karpenter")
    except binaries.BinariesMissing as missing:
        checkout = pathlib.Path(berth.__file__).resolve().parent.parent
        if not (checkout / "hack" / "build-k8s").is_file():
            raise click.ClickException(str(missing)) from None
        click.echo("berth up --real --autoscale: no Karpenter yet; building it (hack/build-k8s)")
        try:
            binaries.build(checkout, extras=("karpenter",))
            return binaries.extra("karpenter")
        except binaries.BinariesMissing as failed:
            raise click.ClickException(str(failed)) from None


def run_real(
    *,
    pools: collections.abc.Sequence[kubelets.NodePool],
    http_port: int,
    log_level: str,
    mode: settings.Mode,
    directory: pathlib.Path,
    admission_namespaces: str = "optIn",
    kubeconfig: pathlib.Path | None = None,
    port: int = 0,
    autoscale: bool = False,
) -> int:
    """Run the whole of ``berth up --real``; the process's exit code. ``kubeconfig``: where to
    write the administrator's kubeconfig too; ``port``: the API server's (0: any free);
    ``admission_namespaces``: the chart's ``admission.namespaces`` (``optIn`` or ``all``)."""
    if not install.CHART.is_dir():
        raise click.ClickException(
            f"berth up --real installs the Helm chart of a checkout of Berth, and there is none "
            f"at {install.CHART}: run it from a checkout (pip install -e '.[real]' there)"
        )
    found = _binaries()
    autoscaler = _karpenter() if autoscale else None
    shutil.rmtree(directory, ignore_errors=True)  # a fresh cluster every time
    ports = controlplane.Ports.free()
    if port:
        ports = dataclasses.replace(ports, apiserver=port)
    plane = controlplane.ControlPlane(
        directory,
        pools=pools,
        binaries=found,
        audited_users=[install.USER],
        progress=lambda step: click.echo(f"berth up --real: {step}"),
        ports=ports,
    )
    try:
        plane.start()
        if autoscaler is not None:
            karpenter.Karpenter(plane, directory=autoscaler).start()
        written = plane.admin_kubeconfig
        if kubeconfig is not None:
            kubeconfig.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(plane.admin_kubeconfig, kubeconfig)
            kubeconfig.chmod(0o600)  # it holds the administrator's key
            written = kubeconfig.resolve()
        click.echo("berth up --real: installing Berth's chart")
        installation = asyncio.run(
            install.install(
                plane,
                mode=mode.value,
                values={"admission": {"namespaces": admission_namespaces}},
            )
        )
        code = asyncio.run(
            _operate(
                plane,
                installation,
                http_port=http_port,
                log_level=log_level,
                kubeconfig=written,
                admission_namespaces=admission_namespaces,
            )
        )
    except processes.ComponentFailed as failed:
        raise click.ClickException(str(failed)) from None
    finally:
        plane.stop()
    return int(code)


async def _operate(
    plane: controlplane.ControlPlane,
    installation: install.Installation,
    *,
    http_port: int,
    log_level: str,
    kubeconfig: pathlib.Path,
    admission_namespaces: str,
) -> main.ExitCode:
    admission = settings.AdmissionSettings(webhook=False)
    if installation.webhook_cert is not None and installation.webhook_key is not None:
        admission = settings.AdmissionSettings(
            webhook_host="127.0.0.1",
            webhook_port=installation.webhook_port,
            cert_file=installation.webhook_cert,
            key_file=installation.webhook_key,
        )
    identity = "berth-up-real"
    config = settings.Settings(
        # As a replica pod would: the token names the pod the Lease holder identity names.
        kubeconfig=installation.replica(identity),
        namespace=installation.namespace,
        mode=settings.Mode(installation.mode),
        admission=admission,
        # A local cluster's convenience, chosen here: the HTTP API (dashboard, `kubectl berth
        # --operator`) answers without a token, on loopback only. `berth run` (and the chart)
        # authenticate and authorize by default.
        http_host="127.0.0.1",
        http_authorization=False,
        http_port=http_port,
        log_level=log_level,
        leader_election={"identity": identity},
    )
    nodes = sum(p.count for p in plane.pools)
    autoscaled = (
        f"; Karpenter adds {', '.join(t.name for t in karpenter.INSTANCE_TYPES)} machines "
        "(kubectl get nodepools,nodeclaims)"
        if "karpenter" in plane.processes
        else ""
    )

    ports: list[int] = []

    def ready() -> None:
        # Printed once pods can be created (admission mode: once the webhook listens).
        port = ports[-1]  # the latest: Berth may have been started again
        click.echo(
            f"berth up --real: Kubernetes {binaries.KUBERNETES_VERSION} at {plane.url} "
            f"(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK with {nodes} "
            f"node(s){autoscaled}); Berth runs as {install.USER} in {installation.mode} mode, "
            "its HTTP API "
            f"at http://127.0.0.1:{port}; logs in {plane.directory / 'logs'}\n"
            + up_steps.next_steps(
                mode=settings.Mode(installation.mode),
                kubeconfig=kubeconfig,
                binder="kube-scheduler",
                namespaces=admission_namespaces,
            )
            + f"\n  dashboard: http://127.0.0.1:{port}/dashboard\nPress Ctrl+C to stop."
        )

    stop = signals.stop_on_signals()
    announced = False

    def connected() -> None:
        nonlocal announced
        if not announced:
            announced = True
            ready()
        else:
            click.echo(
                f"berth up --real: Berth runs again, its HTTP API at http://127.0.0.1:{ports[-1]}"
            )

    backoff = RESTART_BACKOFF
    while True:
        started = time.monotonic()
        code = await main.run(
            config,
            stop=stop,
            leader_components=scheduling.leader_components,
            on_serving=ports.append,
            on_connected=connected,
        )
        if stop.is_set() or code is main.ExitCode.OK:
            return code
        if time.monotonic() - started >= _RAN_WELL:
            backoff = RESTART_BACKOFF
        click.echo(
            f"berth up --real: Berth exited ({code.name}: it lost its Lease, or a part of it "
            f"failed; logs above); starting it again in {backoff:g}s, as a kubelet would"
        )
        if await wakeups.sleep_or_stop(backoff, stop=stop):
            return main.ExitCode.OK
        backoff = min(backoff * 2, RESTART_BACKOFF_MAX)
