"""``berth up`` and ``berth demo``: Berth on an embedded cluster, in one process.

``berth up`` starts the in-memory API server (:mod:`berth.emulator`) on its own thread with
simulated nodes (``--nodes SPEC``, repeatable; kubelets run pods ``--speedup`` times faster
than real time, the flag ``berth emulator`` has too) and a stand-in for kube-scheduler
(:mod:`berth.emulator.binder`), installs Berth's CRDs, writes a kubeconfig under the state
directory (:func:`state_directory`, or ``--kubeconfig``), prints its path and what to type next
for the mode chosen (:func:`next_steps`), and runs the operator (:func:`berth.operator.main.run`,
the same process ``berth run`` is) until interrupted. ``--mode admission`` also registers the
chart's admission webhooks, pointed at the operator (:mod:`berth.cli.up_webhooks`). With
``--real`` the same options act on a real control plane (:mod:`berth.cli.up_real`).

``berth demo`` does the same, then applies ``examples/`` (queues, a gang, a reservation with
its owner, a plain pod, in folder order), shows progress while they are placed and run,
prints the final ``kubectl get berth,pods -o wide`` tables (rendered by the API server's own
printer columns) and a few of the operator's metrics, and exits 0 — or 1 if the examples did
not finish within ``--timeout``. It is the README's "run the main job" command.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import pathlib
import re
import shutil
import socket
import tempfile
import time
import typing

import aiohttp
import click
import rich.console
import rich.live
import rich.table
import yaml

import berth
from berth.api import core, crds, custom_objects, keys
from berth.api import objects as api_objects
from berth.cli import emulator as emulator_cli
from berth.cli import signals, up_steps
from berth.emulator import kubelets, rest, server, tables
from berth.operator import main, scheduling, settings
from berth.util import extras, wakeups
from berth.util import logging as berth_logging

__all__ = [
    "LocalCluster",
    "apply_examples",
    "demo_command",
    "start_cluster",
    "state_directory",
    "up_command",
]

logger = logging.getLogger(__name__)

DEFAULT_NODES = ("4x cpu=8,memory=32Gi",)
_EXAMPLE_FOLDER = re.compile(r"^\d\d-")
_DONE_PHASES = frozenset({"Succeeded", "Failed"})
_SHOWN_METRICS = (
    "berth_schedule_attempts_total",
    "berth_binding_duration_seconds_count",
    "berth_e2e_scheduling_duration_seconds_count",
    "berth_podgroups",
    "berth_leader_status",
)
# (kind, title, apiVersion, plural) of what the demo shows, in the order it shows them.
_SHOWN_KINDS = (
    ("Queue", "Queues", keys.API_VERSION, "queues"),
    ("PodGroup", "PodGroups", keys.API_VERSION, "podgroups"),
    ("Reservation", "Reservations", keys.API_VERSION, "reservations"),
    ("Pod", "Pods", "v1", "pods"),
)

Shown: typing.TypeAlias = (
    core.Pod | custom_objects.Queue | custom_objects.PodGroup | custom_objects.Reservation
)
"""An object of the kinds the demo shows (:data:`_SHOWN_KINDS`)."""


class TableColumn(typing.TypedDict, total=False):
    """A column of a ``meta.k8s.io/v1`` Table (the fields read here)."""

    name: str
    type: str


class TableRow(typing.TypedDict, total=False):
    cells: list[str | int | float | bool | None]


class Table(typing.TypedDict, total=False):
    """``kubectl get``'s ``meta.k8s.io/v1`` Table, as the emulator renders it."""

    columnDefinitions: list[TableColumn]
    rows: list[TableRow]


@dataclasses.dataclass
class LocalCluster:
    """The embedded API server (on its own thread) and the kubeconfig pointing at it."""

    threaded: server.ThreadedEmulator
    kubeconfig: pathlib.Path
    nodes: int

    @property
    def url(self) -> str:
        return self.threaded.emulator.url

    def stop(self) -> None:
        self.threaded.stop()

    def objects(self, api_version: str, plural: str) -> list[Shown]:
        """Every object of a kind the demo shows (read in process, on the server's thread)."""
        api = self.threaded.emulator.api

        def read() -> list[Shown]:
            resource = api.resource(api_version, plural)
            # The emulator stores decoded JSON: read here as the records they are.
            return typing.cast(list[Shown], list(api.storage.list(resource.key)))

        return self.threaded.call(read)

    def table(self, api_version: str, plural: str) -> tuple[list[str], list[list[str]]]:
        """``kubectl get -o wide``'s header and rows for a kind, from the printer columns."""
        api = self.threaded.emulator.api

        def render() -> Table:
            resource = api.resource(api_version, plural)
            rendered = tables.render(
                resource, list(api.storage.list(resource.key)), now=api.clock.now()
            )
            return typing.cast(Table, rendered)  # the emulator renders decoded JSON

        table = self.threaded.call(render)
        header = [str(c["name"]).upper() for c in table["columnDefinitions"]]
        rows = [["" if c is None else str(c) for c in row["cells"]] for row in table["rows"]]
        return header, rows


def start_cluster(
    *,
    pools: typing.Sequence[kubelets.NodePool],
    speed: float,
    kubeconfig: pathlib.Path,
    host: str = "127.0.0.1",
    port: int = 0,
    audit_log: pathlib.Path | None = None,
) -> LocalCluster:
    """Start the API server with simulated nodes, the stand-in for kube-scheduler
    (:mod:`berth.emulator.binder`) and Berth's CRDs; write the kubeconfig (and, with
    ``audit_log``, one audit line per request served there)."""
    emulator = server.Emulator(host=host, port=port, audit_log=audit_log)
    threaded = server.ThreadedEmulator(emulator).start()
    try:
        emulator = threaded.emulator
        threaded.run(emulator.start_kubelets(list(pools), speedup=speed))
        threaded.run(emulator.start_binder())
        definitions = threaded.call(
            emulator.api.resource, "apiextensions.k8s.io/v1", "customresourcedefinitions"
        )
        for crd in crds.render_all().values():
            threaded.call(emulator.api.create, definitions, crd)
        emulator.write_kubeconfig(kubeconfig)
    except BaseException:
        threaded.stop()
        raise
    return LocalCluster(threaded, kubeconfig.resolve(), sum(p.count for p in pools))


def state_directory() -> pathlib.Path:
    """Where ``berth up`` keeps what outlives it (the kubeconfig): ``$BERTH_STATE_DIR``, else
    ``$XDG_STATE_HOME/berth``, else ``~/.local/state/berth`` — never the working directory."""
    explicit = os.environ.get("BERTH_STATE_DIR")
    if explicit:
        return pathlib.Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".local" / "state"
    return base / "berth"


def default_examples() -> pathlib.Path:
    """The repository's ``examples/`` (beside the package), else ``./examples``."""
    beside = pathlib.Path(berth.__file__).resolve().parent.parent / "examples"
    return beside if beside.is_dir() else pathlib.Path("examples")


async def apply_examples(
    cluster: LocalCluster, directory: pathlib.Path, *, settle: float = 10.0
) -> list[api_objects.KubeObject]:
    """Create every manifest of the numbered example folders, in order; the objects created.

    After a Reservation, the next manifest waits (up to ``settle`` seconds) until the
    reservation is placed, as a user would before starting its owner: an owner created in the
    same instant as its reservation races it for the capacity.
    """
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and _EXAMPLE_FOLDER.match(p.name))
    if not folders:
        raise click.ClickException(f"no numbered example folders in {directory}")
    created: list[api_objects.KubeObject] = []
    api = cluster.threaded.emulator.api
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            for document in yaml.safe_load_all(path.read_text()):
                if not isinstance(document, dict):
                    continue
                obj = cluster.threaded.call(_create, api, document, source=path)
                created.append(obj)
                if obj.get("kind") == "Reservation":
                    await _placed(cluster, obj["metadata"]["name"], timeout=settle)
    return created


async def _placed(cluster: LocalCluster, name: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for obj in cluster.objects(keys.API_VERSION, "reservations"):
            if obj["metadata"]["name"] == name and (obj.get("status") or {}).get("phase") not in (
                None,
                "Pending",
            ):
                return
        await wakeups.sleep_or_stop(0.1)


def _create(
    api: rest.Api,
    body: dict[str, typing.Any],  # Untyped: a user's manifest, any kind, as written
    *,
    source: pathlib.Path,
) -> api_objects.KubeObject:
    """Create one manifest's object (on the server's thread)."""
    group, _, version = str(body.get("apiVersion", "")).rpartition("/")
    resource = api.registry.by_kind(group, version, str(body.get("kind")))
    if resource is None:
        raise click.ClickException(f"{source}: unknown kind {body.get('kind')}")
    namespace = "default" if resource.namespaced else None
    # Api.create checks the manifest as the API server does (kind, metadata, the kind's rules).
    manifest = typing.cast(api_objects.KubeObject, body)
    created = dict(api.create(resource, manifest, namespace=namespace).object)
    return typing.cast(api_objects.KubeObject, created)  # the emulator answers decoded JSON


def _settings(cluster: LocalCluster, *, http_port: int, log_level: str) -> settings.Settings:
    return settings.Settings(
        kubeconfig=cluster.kubeconfig,
        namespace="default",
        # A local cluster's convenience, chosen here: the HTTP API (dashboard, `kubectl berth
        # --operator`) answers without a token, on loopback only (the embedded API server
        # reviews no tokens). `berth run` authenticates and authorizes by default.
        http_host="127.0.0.1",
        http_authorization=False,
        http_port=http_port,
        log_level=log_level,
        leader_election={"identity": "berth-up", "lease_duration": 15},
    )


def _pools(
    ctx: click.Context, param: click.Parameter, specs: tuple[str, ...]
) -> list[kubelets.NodePool]:
    return emulator_cli.parse_pools(ctx, param, specs or DEFAULT_NODES)


def _common(fn: typing.Callable[..., typing.Any]) -> typing.Callable[..., typing.Any]:
    fn = click.option(
        "--nodes",
        "pools",
        multiple=True,
        metavar="SPEC",
        callback=_pools,
        help=f"A pool of simulated nodes (repeatable). Default: {DEFAULT_NODES[0]!r}.",
    )(fn)
    fn = click.option(
        "--speedup",
        type=click.FloatRange(min=0.001),
        default=10.0,
        show_default=True,
        help="How much faster than real time simulated pods start and run.",
    )(fn)
    fn = click.option(
        "--http-port",
        type=click.IntRange(0, 65535),
        default=0,
        show_default=True,
        help="Port of the operator's probes, metrics and API (0: any free port).",
    )(fn)
    return fn


_MODE_HELP = (
    "scheduler: Berth binds the pods that name its scheduler (berth-scheduler). admission: "
    "Berth's webhook gates new pods that carry a queue or group label, or are in a namespace "
    "labelled scheduling.berth.io/admission=enabled; Berth pins each one it admits to a node and "
    "removes the gate, and kube-scheduler binds it — on the embedded cluster, Berth's stand-in "
    "binder plays kube-scheduler (it binds pinned pods to their node, others to the first node "
    "with room; no scoring, no preemption)."
)


@click.command("up", epilog=f"SPEC:\n\n{kubelets.SPEC_HELP}".replace("\n", "\n\n"))
@_common
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    default=None,
    help="Where to write the kubeconfig for kubectl. Default: up/kubeconfig in the state "
    "directory ($BERTH_STATE_DIR, else $XDG_STATE_HOME/berth, else ~/.local/state/berth); with "
    "--real, real-cluster/admin.kubeconfig there.",
)
@click.option(
    "--port", default=0, show_default=True, help="The API server's port (0: any free port)."
)
@click.option("--log-level", default="info", show_default=True, help="The operator's log level.")
@click.option(
    "--audit-log",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    default=None,
    help="Write the API server's audit log here (JSON lines, kube-apiserver's format): who "
    "sent which request, e.g. which Kopf handler wrote a status. The real control plane always "
    "writes its own (real-cluster/logs/audit.log in the state directory).",
)
@click.option(
    "--real",
    is_flag=True,
    help="A real control plane (kube-apiserver, kube-controller-manager, kube-scheduler, KWOK "
    "nodes) instead of the embedded emulator; pods run in real time. Needs a checkout of Berth "
    "and its [real] extra.",
)
@click.option(
    "--mode",
    type=click.Choice([m.value for m in settings.Mode]),
    default=settings.Mode.SCHEDULER.value,
    show_default=True,
    help=_MODE_HELP,
)
@click.option(
    "--admission-namespaces",
    type=click.Choice(up_steps.ADMISSION_NAMESPACES),
    default="optIn",
    show_default=True,
    help="With --mode admission, the chart's admission.namespaces: which namespaces Berth gates "
    "whole, every new pod. optIn: those labelled scheduling.berth.io/admission=enabled (elsewhere "
    "only pods with a queue or group label). all: every namespace but kube-system, berth-system "
    "and those labelled scheduling.berth.io/admission=disabled (as Kueue's "
    "manageJobsWithoutQueueName).",
)
@click.option(
    "--autoscale",
    is_flag=True,
    help="With --real: run Karpenter (its KWOK provider) too, with a NodePool of CPU and GPU "
    "machines it adds when pods fit no node and removes when empty (docs/autoscaling.md).",
)
@click.pass_context
def up_command(
    ctx: click.Context,
    pools: list[kubelets.NodePool],
    speedup: float,
    http_port: int,
    kubeconfig: pathlib.Path | None,
    port: int,
    log_level: str,
    audit_log: pathlib.Path | None,
    real: bool,
    mode: str,
    admission_namespaces: str,
    autoscale: bool,
) -> None:
    """Run Berth on a local cluster with simulated nodes until interrupted: the embedded API
    server (default) or a real control plane (--real), in either mode."""
    berth_logging.configure(log_level)
    chosen = settings.Mode(mode)
    if (
        chosen is not settings.Mode.ADMISSION
        and ctx.get_parameter_source("admission_namespaces")
        is not click.core.ParameterSource.DEFAULT
    ):
        raise click.UsageError(
            "--admission-namespaces applies to --mode admission (in scheduler mode a pod is "
            "Berth's when it names Berth's scheduler, whatever its namespace)"
        )
    if real:
        for option, why in (
            ("speedup", "KWOK runs pods in real time"),
            (
                "audit_log",
                "the real control plane writes kube-apiserver's audit log to "
                "real-cluster/logs/audit.log in the state directory",
            ),
        ):
            if ctx.get_parameter_source(option) is not click.core.ParameterSource.DEFAULT:
                raise click.UsageError(
                    f"--{option.replace('_', '-')} does not apply to --real: {why}"
                )
        # The real control plane's libraries come with the [real] extra: imported only here.
        try:
            from berth.cli import up_real
        except extras.MissingExtra as missing:
            raise click.ClickException(
                f"berth up --real needs Berth's [real] extra ({missing.module} is not "
                f"installed): {extras.install_hint('real')}"
            ) from None
        raise SystemExit(
            up_real.run_real(
                pools=pools,
                http_port=http_port,
                log_level=log_level,
                mode=chosen,
                admission_namespaces=admission_namespaces,
                directory=state_directory() / "real-cluster",
                kubeconfig=kubeconfig,
                port=port,
                autoscale=autoscale,
            )
        )
    if autoscale:
        raise click.UsageError("--autoscale applies to --real (Karpenter needs a real plane)")
    if kubeconfig is None:
        kubeconfig = state_directory() / "up" / "kubeconfig"
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(
        pools=pools, speed=speedup, kubeconfig=kubeconfig, port=port, audit_log=audit_log
    )
    try:
        admission = settings.AdmissionSettings(webhook=False)
        if chosen is settings.Mode.ADMISSION:
            admission = _register_webhooks(
                cluster, state_directory() / "up" / "admission", namespaces=admission_namespaces
            )
        code = asyncio.run(
            _up(
                cluster,
                http_port=http_port,
                log_level=log_level,
                mode=chosen,
                admission=admission,
                admission_namespaces=admission_namespaces,
            )
        )
    finally:
        cluster.stop()
    raise SystemExit(int(code))


def _register_webhooks(
    cluster: LocalCluster, directory: pathlib.Path, *, namespaces: str
) -> settings.AdmissionSettings:
    """Admission mode on the embedded cluster: a certificate for the operator's webhook server
    and the chart's webhook configurations pointing at it (:mod:`berth.cli.up_webhooks`)."""
    try:
        from berth.cli import up_webhooks
    except extras.MissingExtra as missing:
        raise click.ClickException(f"berth up --mode admission: {missing}") from None
    shutil.rmtree(directory, ignore_errors=True)
    certificate = up_webhooks.serving_certificate(directory)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    api = cluster.threaded.emulator.api
    for body in up_webhooks.configurations(
        f"https://127.0.0.1:{port}", certificate.ca_pem, namespaces=namespaces
    ):
        plural = str(body["kind"]).lower() + "s"
        resource = cluster.threaded.call(api.resource, "admissionregistration.k8s.io/v1", plural)
        cluster.threaded.call(api.create, resource, dict(body))
    return settings.AdmissionSettings(
        webhook_host="127.0.0.1",
        webhook_port=port,
        cert_file=certificate.cert,
        key_file=certificate.key,
    )


async def _up(
    cluster: LocalCluster,
    *,
    http_port: int,
    log_level: str,
    mode: settings.Mode,
    admission: settings.AdmissionSettings,
    admission_namespaces: str = "optIn",
) -> main.ExitCode:
    stop = signals.stop_on_signals()
    ports: list[int] = []

    def ready() -> None:
        # Printed once pods can be created (admission mode: once the webhook listens), so
        # that the next steps, typed at once, are not refused.
        (port,) = ports
        click.echo(
            f"berth up: Kubernetes API at {cluster.url} with {cluster.nodes} simulated node(s)"
            f" and Berth's stand-in binder for kube-scheduler, Berth's CRDs installed; Berth "
            f"runs in {mode.value} mode, its HTTP API at http://127.0.0.1:{port}\n"
            + up_steps.next_steps(
                mode=mode,
                kubeconfig=cluster.kubeconfig,
                binder="Berth's stand-in binder (in place of kube-scheduler)",
                namespaces=admission_namespaces,
            )
            + f"\n  dashboard: http://127.0.0.1:{port}/dashboard\nPress Ctrl+C to stop."
        )

    config = _settings(cluster, http_port=http_port, log_level=log_level).model_copy(
        update={"mode": mode, "admission": admission}
    )
    return await main.run(
        config,
        stop=stop,
        leader_components=scheduling.leader_components,
        on_serving=ports.append,
        on_connected=ready,
    )


@click.command("demo")
@_common
@click.option(
    "--examples",
    type=click.Path(file_okay=False, exists=True, path_type=pathlib.Path),
    default=None,
    help="The examples folder. Default: the repository's examples/.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=50.0,
    show_default=True,
    help="Seconds to wait for the examples to finish.",
)
@click.option("--log-level", default="warning", show_default=True, help="The operator's log level.")
def demo_command(
    pools: list[kubelets.NodePool],
    speedup: float,
    http_port: int,
    examples: pathlib.Path | None,
    timeout: float,
    log_level: str,
) -> None:
    """Run Berth on an embedded cluster, apply examples/, show them placed and run, exit."""
    berth_logging.configure(log_level)
    console = rich.console.Console()
    if not console.is_terminal:
        # Piped or captured: no terminal width to respect, so keep table cells whole.
        console = rich.console.Console(width=200)
    directory = examples if examples is not None else default_examples()
    if not directory.is_dir():
        raise click.ClickException(
            f"no examples folder at {directory}: run berth demo in a checkout of Berth, or "
            "pass --examples DIR"
        )
    with contextlib.ExitStack() as stack:
        scratch = pathlib.Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="berth-demo-"))
        )
        cluster = start_cluster(pools=pools, speed=speedup, kubeconfig=scratch / "kubeconfig")
        stack.callback(cluster.stop)
        finished = asyncio.run(
            _demo(
                cluster,
                directory=directory,
                http_port=http_port,
                timeout=timeout,
                log_level=log_level,
                console=console,
            )
        )
    raise SystemExit(0 if finished else 1)


async def _demo(
    cluster: LocalCluster,
    *,
    directory: pathlib.Path,
    http_port: int,
    timeout: float,
    log_level: str,
    console: rich.console.Console,
) -> bool:
    started = time.monotonic()
    stop = signals.stop_on_signals()
    ports: list[int] = []
    operator = asyncio.create_task(
        main.run(
            _settings(cluster, http_port=http_port, log_level=log_level),
            stop=stop,
            leader_components=scheduling.leader_components,
            on_serving=ports.append,
        ),
        name="operator",
    )
    console.print(
        f"[bold]berth demo[/]: embedded API server at {cluster.url}, {cluster.nodes} simulated "
        f"node(s); applying {directory}"
    )
    applied = await apply_examples(cluster, directory)
    finished = False
    with rich.live.Live(_progress(cluster, applied), console=console, refresh_per_second=4) as live:
        deadline = started + timeout
        while time.monotonic() < deadline and not operator.done() and not stop.is_set():
            await wakeups.sleep_or_stop(0.25, stop=stop)
            live.update(_progress(cluster, applied))
            if _finished(cluster, applied):
                finished = True
                break
        if finished:
            # One more cycle and status pass, so the tables show the final usage.
            await wakeups.sleep_or_stop(2.0, stop=stop)
            live.update(_progress(cluster, applied))
    console.print()
    metrics = await _metrics(ports[0]) if ports and not operator.done() else ""
    stop.set()
    code = await operator
    for _, title, api_version, plural in _SHOWN_KINDS:
        header, rows = cluster.table(api_version, plural)
        table = rich.table.Table(title=title, title_justify="left", box=None, header_style="bold")
        for name in header:
            table.add_column(name)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    if metrics:
        console.print("[bold]Operator metrics[/] (GET /metrics):")
        console.print(metrics, highlight=False)
    seconds = time.monotonic() - started
    if finished and code is main.ExitCode.OK:
        console.print(f"[green]done[/]: every example placed and run in {seconds:.1f}s")
        return True
    why = "the operator stopped" if operator.done() and not finished else "timed out"
    console.print(f"[red]not finished[/] ({why} after {seconds:.1f}s)")
    return False


def _progress(cluster: LocalCluster, applied: list[api_objects.KubeObject]) -> rich.table.Table:
    table = rich.table.Table(title="Examples", title_justify="left", box=None, header_style="bold")
    for column in ("KIND", "NAME", "PHASE", "WHERE / WHY"):
        table.add_column(column)
    for kind, obj in _current(cluster, applied):
        status = obj.get("status") or {}
        phase = str(status.get("phase") or "")
        if kind == "Queue" and status:
            phase = f"{status.get('running', 0)} running, {status.get('pending', 0)} pending"
        where = str((obj.get("spec") or {}).get("nodeName") or status.get("nodeName") or "")
        if not where:
            for condition in status.get("conditions") or ():
                if condition.get("status") == "False" and condition.get("message"):
                    where = str(condition["message"])
        table.add_row(kind, obj["metadata"]["name"], phase or "-", where)
    return table


def _current(
    cluster: LocalCluster, applied: list[api_objects.KubeObject]
) -> list[tuple[str, Shown]]:
    wanted = {(o["kind"], o["metadata"]["name"]) for o in applied}
    out: list[tuple[str, Shown]] = []
    for kind, _, api_version, plural in _SHOWN_KINDS:
        for obj in cluster.objects(api_version, plural):
            if (kind, obj["metadata"]["name"]) in wanted:
                out.append((kind, obj))
    return out


def _finished(cluster: LocalCluster, applied: list[api_objects.KubeObject]) -> bool:
    """Every example pod ran to completion and every PodGroup says so."""
    current = _current(cluster, applied)
    pods = [o for k, o in current if k == "Pod"]
    groups = [o for k, o in current if k == "PodGroup"]
    expected = sum(1 for o in applied if o["kind"] == "Pod")
    return (
        len(pods) == expected
        and all((p.get("status") or {}).get("phase") in _DONE_PHASES for p in pods)
        and all((g.get("status") or {}).get("phase") in ("Finished", "Failed") for g in groups)
    )


async def _metrics(port: int) -> str:
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
    except aiohttp.ClientError as exc:
        return f"(could not read /metrics: {exc})"
    lines = [
        line
        for line in text.splitlines()
        if line.startswith(_SHOWN_METRICS) and not line.startswith("#")
    ]
    return "\n".join(lines)
