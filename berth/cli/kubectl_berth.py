"""``kubectl berth``: the ``kubectl-berth`` console script (``queues``, ``why``).

kubectl runs an executable called ``kubectl-berth`` found on PATH for ``kubectl berth ...``,
with its environment (``KUBECONFIG`` included). Two read-only commands show what ``kubectl
get`` cannot show well:

- ``queues``: the Queue hierarchy as a tree — weight, priority, state, guaranteed, limit, fair
  share, allocated, requested, pending/running PodGroups, conditions (:mod:`berth.cli.
  queue_trees`); ``-o json|yaml`` for scripts;
- ``queue QUEUE``: the queue's state and usage and the groups waiting in it, in the order the
  scheduler tries them, each with its position and reason (:mod:`berth.cli.queue_lines`): from
  the operator's visibility API with ``--operator URL`` (or ``$BERTH_OPERATOR_URL``; asked
  with the kubeconfig user's bearer token, or ``--token``'s: the operator authorizes it for the
  path), else from the PodGroups' status as the operator wrote it;
- ``why POD | podgroup/NAME``: the scheduler's reason (the PodGroup's ``Scheduled``
  condition, the latest ``FailedScheduling`` Event) and the nodes: the cluster is listed and a
  dry-run session of the same scheduler code runs over it client-side (:mod:`berth.cli.
  explaining`) to show every node's filter verdict and the top-N score table
  (:mod:`berth.cli.why_reports`).

Neither writes anything. Flags, errors and exit codes are kubectl's, as for
``kubectl-create-reservation`` (:mod:`berth.cli.kubectl_common`).
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import json
import pathlib
import re
import typing

import click
import pydantic.alias_generators
import rich.console
import yaml

from berth.api import core, custom_objects, keys, podgroups
from berth.api import objects as api_objects
from berth.cli import explaining, kubectl_common, queue_lines, queue_trees, why_reports
from berth.kube.transport import clients, listing
from berth.kube.transport import errors as kube_errors
from berth.operator import errors as operator_errors
from berth.operator import settings as operator_settings
from berth.scheduler.framework import errors as framework_errors
from berth.scheduler.framework import profiles
from berth.scheduler.plugins import registry as plugin_registry
from berth.util import clocks

__all__ = ["PROG", "Target", "cli", "load_profile", "main", "parse_target"]

PROG = "kubectl berth"
DEFAULT_TOP = 5
MAX_TOP = 1000

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_POD_KINDS = frozenset({"pod", "pods", "po"})
_GROUP_KINDS = frozenset(
    {"podgroup", "podgroups", "bpg", f"podgroup.{keys.GROUP}", f"podgroups.{keys.GROUP}"}
)


@dataclasses.dataclass(frozen=True)
class Target:
    """What ``why`` explains: a pod or a PodGroup, by name."""

    kind: str  # "Pod" or "PodGroup"
    name: str


def parse_target(text: str) -> Target:
    """``POD``, ``pod/NAME`` or ``podgroup/NAME`` (kubectl's spellings: ``po``, ``pods``,
    ``bpg``, ``podgroups.scheduling.berth.io``); ``click.BadParameter`` otherwise."""
    kind, slash, name = text.rpartition("/")
    if not slash:
        kind = "pod"
    kind = kind.lower()
    if kind in _POD_KINDS:
        resolved = "Pod"
    elif kind in _GROUP_KINDS:
        resolved = podgroups.KIND
    else:
        raise click.BadParameter(
            f"{kind!r} is not a kind why explains: give POD, pod/NAME or podgroup/NAME"
        )
    if len(name) > 253 or not _NAME.fullmatch(name):
        raise click.BadParameter(
            f"{name!r} is not a valid name: use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return Target(resolved, name)


def _one_line(text: str) -> str:
    """A multi-line message (a heading, then one problem per line) as one line."""
    head, *problems = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join([head, "; ".join(problems)]) if problems else head


def load_profile(path: pathlib.Path | None, *, scheduler_name: str | None) -> profiles.Profile:
    """The profile to explain with: the default one, or the one in ``path`` — a profile file
    or the operator's configuration file (the chart's ConfigMap ``profile.yaml``), whose
    settings keys are left out, as ``berth run --config`` does."""
    profile = plugin_registry.default_profile()
    if path is not None:
        try:
            document = operator_settings.read_config_file(path)
        except operator_errors.ConfigFileError as exc:
            raise click.ClickException(f"--config: {exc}") from None
        # Settings keys are the operator's; schedulerName is both a setting and the profile's.
        settings_keys = set(operator_settings.Settings.model_fields) - {"scheduler_name"}
        document = {
            k: v
            for k, v in document.items()
            if pydantic.alias_generators.to_snake(str(k)) not in settings_keys
        }
        # As the operator reads it: only a schedulerName renames the default profile.
        if set(document) - {"schedulerName"}:
            try:
                profile = profiles.parse(document, source=str(path))
            except framework_errors.ProfileError as exc:
                raise click.ClickException(f"--config: {_one_line(str(exc))}") from None
        elif document.get("schedulerName"):
            profile = profile.model_copy(update={"scheduler_name": document["schedulerName"]})
    if scheduler_name is not None:
        profile = profile.model_copy(update={"scheduler_name": scheduler_name})
    return profile


# Reading the cluster --------------------------------------------------------------------------


async def _read_queues(
    *, kubeconfig: str | None, context: str | None
) -> tuple[custom_objects.Queue, ...]:
    async with clients.connect_async(kubeconfig=kubeconfig, context=context) as connection:
        listed = await listing.list_all(connection.api, listing.QUEUES)
    # Listed from the Queues' collection: Queues.
    return typing.cast(tuple[custom_objects.Queue, ...], listed)


@dataclasses.dataclass(frozen=True)
class _Read:
    namespace: str
    target: api_objects.KubeObject  # a Pod or a PodGroup, as the Target's kind says
    objects: listing.ClusterObjects
    events: tuple[core.Event, ...]


async def _read_for_why(
    target: Target, *, namespace: str | None, kubeconfig: str | None, context: str | None
) -> _Read:
    async with clients.connect_async(kubeconfig=kubeconfig, context=context) as connection:
        ns = namespace or connection.namespace
        collection = listing.PODS if target.kind == "Pod" else listing.PODGROUPS
        # The target first: a name that does not exist fails as kubectl's NotFound at once.
        obj = await listing.get(connection.api, collection, name=target.name, namespace=ns)
        objects, events = await asyncio.gather(
            listing.read_cluster(connection.api),
            listing.list_all(connection.api, listing.EVENTS, namespace=ns),
        )
    # Listed from the Events' collection: Events.
    return _Read(ns, obj, objects, typing.cast(tuple[core.Event, ...], events))


# Facts from the API ---------------------------------------------------------------------------


def _condition_line(group: custom_objects.PodGroup | None) -> str | None:
    if group is None:
        return None
    for condition in (group.get("status") or {}).get("conditions") or ():
        if condition.get("type") == podgroups.CONDITION_SCHEDULED:
            text = f"{podgroups.CONDITION_SCHEDULED}={condition.get('status')}"
            if condition.get("reason"):
                text += f" ({condition['reason']})"
            message = " ".join(str(condition.get("message") or "").split())
            return f"{text}: {message}" if message else text
    return f"no {podgroups.CONDITION_SCHEDULED} condition yet (is Berth's operator running?)"


def _facts(target: Target, read: _Read, run: explaining.DryRun) -> why_reports.Facts:
    key = f"{read.namespace}/{target.name}"
    groups = {explaining.object_key(g): g for g in read.objects.pod_groups}
    if target.kind == podgroups.KIND:
        target_group = typing.cast(custom_objects.PodGroup, read.target)
        group_spec = target_group.get("spec") or {}
        group_status = target_group.get("status") or {}
        summary = (
            f"queue {group_spec.get('queue', keys.DEFAULT_QUEUE)}, "
            f"minMember {group_spec.get('minMember', 1)}"
            f", phase {group_status.get('phase', 'Pending')}"
        )
        about = {(podgroups.KIND, target.name)}
        about |= {("Pod", m.key.partition("/")[2]) for m in run.members}
        event = why_reports.latest_failed_scheduling(read.events, about=about)
        return why_reports.Facts(
            podgroups.KIND,
            key,
            summary,
            condition=_condition_line(target_group),
            event=event,
        )
    pod = typing.cast(core.Pod, read.target)
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName")
    scheduler = spec.get("schedulerName") or "default-scheduler"
    summary = ", ".join(
        [
            f"bound to {node}" if node else "not bound",
            f"phase {status.get('phase', 'Pending')}",
            f"scheduler {scheduler}",
        ]
    )
    if scheduler != run.scheduler_name:
        summary += f" (not Berth's: the dry run offers it to {run.scheduler_name})"
    member = next((m for m in run.members if m.key == key), None)
    group_key = member.group if member is not None else None
    group = groups.get(group_key) if group_key is not None else None
    event = why_reports.latest_failed_scheduling(read.events, about={("Pod", target.name)})
    return why_reports.Facts(
        "Pod",
        key,
        summary,
        condition=_condition_line(group),
        condition_of=group_key if group is not None else None,
        event=event,
    )


# The commands ---------------------------------------------------------------------------------

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


_EXAMPLES = """
\b
Examples:
  kubectl berth queues                    # the queue tree: quota, fair share, usage
  kubectl berth why podgroup/train        # why a gang waits: its reason, every node's verdict
  kubectl berth why trainer-0 --top 10    # where a pod would go now, the 10 best nodes' scores
"""


@click.group(name="berth", epilog=_EXAMPLES, context_settings=_CONTEXT)
def cli() -> None:
    """Inspect Berth's queues and scheduling decisions (read-only)."""


_QUEUES_EXAMPLES = """
\b
Examples:
  # The queue tree: guarantees, limits, fair share, usage, pending and running groups
  kubectl berth queues

\b
  # The same as JSON, for scripts
  kubectl berth queues -o json
"""


@cli.command(name="queues", epilog=_QUEUES_EXAMPLES, context_settings=_CONTEXT)
@click.option(
    "-o", "--output", type=click.Choice(["tree", "json", "yaml"]), default="tree",
    show_default=True, help="How to print the queues.",
)  # fmt: skip
@kubectl_common.namespace_option
@kubectl_common.connection_options
@kubectl_common.verbosity_option
def queues_command(
    *,
    output: str,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    verbosity: int,
) -> None:
    """Show the Queue hierarchy with each queue's quota, share and usage.

    Queues are cluster-scoped: -n is accepted and ignored, as kubectl ignores it.
    """
    del namespace, verbosity
    objects = asyncio.run(_read_queues(kubeconfig=kubeconfig, context=context))
    trees = queue_trees.build(objects)
    if output == "json":
        click.echo(json.dumps(queue_trees.to_json(trees), indent=4))
    elif output == "yaml":
        click.echo(yaml.safe_dump(queue_trees.to_json(trees), sort_keys=False).rstrip("\n"))
    else:
        console = rich.console.Console(highlight=False)
        with console.capture() as captured:
            console.print(queue_trees.tree(trees))
        # Grid cells are padded to their column's width: no trailing blanks in copied text.
        click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()), color=True)


_QUEUE_EXAMPLES = """
\b
Examples:
  # Who waits in team-a, in what order, and why
  kubectl berth queue team-a

\b
  # The same from the operator's visibility API (every group, pods' groups of one included),
  # asked with your kubeconfig user's bearer token (or --token's)
  kubectl berth queue team-a --operator http://127.0.0.1:8080
"""


async def _bearer_token(*, kubeconfig: str | None, context: str | None) -> str | None:
    """The bearer token the kubeconfig's user sends the API server (a token, a token file or
    an exec plugin's), if it uses one: what the operator's HTTP API reviews."""
    try:
        async with clients.connect_async(kubeconfig=kubeconfig, context=context) as connection:
            keys = connection.api.configuration.api_key
            found = keys.get("BearerToken") or keys.get("authorization")
    except kube_errors.ConfigError:
        return None  # no kubeconfig: ask without a token (berth up's operator needs none)
    if not found:
        return None
    text = str(found)
    return text[7:].strip() if text.lower().startswith("bearer ") else text


async def _read_line_objects(
    *, name: str, kubeconfig: str | None, context: str | None
) -> tuple[custom_objects.Queue | None, tuple[custom_objects.PodGroup, ...], list[str]]:
    """The Queue ``name`` (None: none), every PodGroup, and every queue's name."""
    async with clients.connect_async(kubeconfig=kubeconfig, context=context) as connection:
        listed_queues, listed_groups = await asyncio.gather(
            listing.list_all(connection.api, listing.QUEUES),
            listing.list_all(connection.api, listing.PODGROUPS),
        )
    # Listed from the Queues' and PodGroups' collections.
    queues = typing.cast(tuple[custom_objects.Queue, ...], listed_queues)
    groups = typing.cast(tuple[custom_objects.PodGroup, ...], listed_groups)
    names = [str((q.get("metadata") or {}).get("name")) for q in queues]
    found = [q for q in queues if (q.get("metadata") or {}).get("name") == name]
    return (found[0] if found else None), groups, names


@cli.command(name="queue", epilog=_QUEUE_EXAMPLES, context_settings=_CONTEXT)
@click.argument("name", metavar="QUEUE")
@click.option(
    "--operator", "operator_url", envvar="BERTH_OPERATOR_URL", metavar="URL",
    help="The operator's HTTP address (berth up prints it); default: read PodGroups' status.",
)  # fmt: skip
@click.option(
    "--token", "operator_token", envvar="BERTH_OPERATOR_TOKEN", metavar="TOKEN",
    help="Bearer token for --operator; default: your kubeconfig user's, if it has one.",
)  # fmt: skip
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, metavar="N",
    help="Show at most the first N waiting groups.",
)  # fmt: skip
@kubectl_common.namespace_option
@kubectl_common.connection_options
@kubectl_common.verbosity_option
def queue_command(
    name: str,
    *,
    operator_url: str | None,
    operator_token: str | None,
    limit: int,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    verbosity: int,
) -> None:
    """Show one queue's line: the groups waiting in it, in order, with why they wait."""
    del namespace, verbosity
    try:
        if operator_url:
            token = operator_token or asyncio.run(
                _bearer_token(kubeconfig=kubeconfig, context=context)
            )
            line = queue_lines.from_operator(operator_url, name, limit=limit, token=token)
        else:
            queue, groups, names = asyncio.run(
                _read_line_objects(name=name, kubeconfig=kubeconfig, context=context)
            )
            line = queue_lines.from_objects(queue, groups, name=name, limit=limit, known=names)
    except queue_lines.NoSuchQueue as exc:
        raise click.ClickException(f"(NotFound): {exc}") from None
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    console = rich.console.Console(highlight=False)
    with console.capture() as captured:
        console.print(queue_lines.render(line))
    click.echo("\n".join(text.rstrip() for text in captured.get().splitlines()), color=True)


_WHY_EXAMPLES = """
\b
Examples:
  # Why does the gang "train" wait? Its reason, and every node's verdict for its pods
  kubectl berth why podgroup/train

\b
  # Where would the pod trainer-0 go now, and how do the best 10 nodes score?
  kubectl berth why trainer-0 -n team-a --top 10

\b
  # Explain with the profile the chart installed
  kubectl get configmap berth-profile -n berth-system \\
      -o jsonpath='{.data.profile\\.yaml}' > profile.yaml
  kubectl berth why podgroup/train --config profile.yaml
"""


@cli.command(name="why", epilog=_WHY_EXAMPLES, context_settings=_CONTEXT)
@click.argument("target", metavar="POD|podgroup/NAME")
@click.option(
    "--top", type=click.IntRange(1, MAX_TOP), default=DEFAULT_TOP, show_default=True,
    metavar="N", help="Rows of the score table.",
)  # fmt: skip
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=pathlib.Path),
    metavar="PROFILE.yaml",
    help="Scheduler profile (or the operator's config file) to explain with. Default: the "
    "built-in profile.",
)
@click.option(
    "--scheduler-name", metavar="NAME", help="Pods of this scheduler are Berth's (default: "
    "the profile's, berth-scheduler).",
)  # fmt: skip
@kubectl_common.namespace_option
@kubectl_common.connection_options
@kubectl_common.verbosity_option
def why_command(
    target: str,
    *,
    top: int,
    config: pathlib.Path | None,
    scheduler_name: str | None,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    verbosity: int,
) -> None:
    """Explain why a pod or PodGroup waits, or where a pod would go and why.

    Shows the scheduler's reason (the PodGroup's Scheduled condition, the latest
    FailedScheduling Event), then runs the scheduler once, client-side and read-only, over the
    cluster as listed now: every node's filter verdict (the first plugin that rejects it) and
    the top-N nodes by score. A bound pod is offered again as if it were pending.
    """
    try:
        wanted = parse_target(target)
    except click.BadParameter as exc:
        exc.param_hint = "'POD|podgroup/NAME'"
        raise
    profile = load_profile(config, scheduler_name=scheduler_name)
    read = asyncio.run(
        _read_for_why(wanted, namespace=namespace, kubeconfig=kubeconfig, context=context)
    )
    key = f"{read.namespace}/{wanted.name}"
    with explaining.quiet_logs(quiet=verbosity == 0):
        try:
            run = explaining.dry_run(
                read.objects,
                pod_keys=(key,) if wanted.kind == "Pod" else (),
                group_key=key if wanted.kind == podgroups.KIND else None,
                profile=profile,
                registry=plugin_registry.in_tree_registry(),
                clock=clocks.SystemClock(),
                top=top,
            )
        except framework_errors.ProfileError as exc:
            raise click.ClickException(_one_line(str(exc))) from None
    click.echo(why_reports.render(_facts(wanted, read, run), run))


# Entry point ----------------------------------------------------------------------------------


def main(argv: collections.abc.Sequence[str] | None = None) -> typing.NoReturn:
    """The console script: run the command, turn every failure into one line and an exit code."""
    kubectl_common.run(cli, prog=PROG, argv=argv)
