"""``kubectl create reservation NAME``: the ``kubectl-create-reservation`` console script.

kubectl (1.37+) runs an executable called ``kubectl-create-<kind>`` found on PATH for
``kubectl create <kind> ...``, passing it the rest of the command line and its environment
(``KUBECONFIG`` included). This module reads kubectl-style flags into a Reservation
(:mod:`berth.api.reservations`), lets the API models validate it, and creates it through
:mod:`berth.kube.transport.clients`, or only prints it (``--dry-run=client``).

Every failure is one line on stderr: ``error: ...`` saying what to change, exit code 1; usage
errors (unknown flag, missing NAME) exit 2; API errors read as kubectl's
(``Error from server (AlreadyExists): ...``). A traceback is printed only with ``--v`` > 0
(:mod:`berth.cli.kubectl_common`, shared with ``kubectl-berth``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import re
import typing

import click
import pydantic
import yaml

from berth.api import (
    core,
    custom_objects,
    durations,
    errors,
    keys,
    meta,
    pods,
    quantities,
    reservations,
    resources,
)
from berth.cli import kubectl_common
from berth.kube.transport import clients
from berth.util import clocks

__all__ = ["Flags", "PROG", "build", "command", "main"]

PROG = "kubectl create reservation"
RESOURCE = f"{reservations.KIND.lower()}.{keys.GROUP}"
"""How kubectl names the resource in its output (``reservation.scheduling.berth.io/r1``)."""
CONTAINER = "reserve"
"""Name of the template's one container (the reserve pod is never created; it is a shape)."""

# Common lower-case resource names people type for the controllers of pods, and their kinds.
_CONTROLLER_KINDS = {
    "job": "Job",
    "jobs": "Job",
    "statefulset": "StatefulSet",
    "statefulsets": "StatefulSet",
    "sts": "StatefulSet",
    "replicaset": "ReplicaSet",
    "replicasets": "ReplicaSet",
    "rs": "ReplicaSet",
    "daemonset": "DaemonSet",
    "daemonsets": "DaemonSet",
    "ds": "DaemonSet",
}
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_NAME_RULE = (
    "use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
)
_EFFECTS = {e.value: e for e in pods.TaintEffect}


@dataclasses.dataclass(frozen=True)
class Flags:
    """The flags that shape the Reservation, as given on the command line (unparsed)."""

    name: str
    cpu: str | None = None
    memory: str | None = None
    gpu: str | None = None
    resource: tuple[str, ...] = ()
    owner_pod: tuple[str, ...] = ()
    owner_controller: tuple[str, ...] = ()
    owner_selector: tuple[str, ...] = ()
    ttl: str | None = None
    expires: str | None = None
    start_at: str | None = None
    node_selector: tuple[str, ...] = ()
    toleration: tuple[str, ...] = ()
    queue: str | None = None
    allocate_once: bool | None = None


def _fail(flag: str, why: str) -> click.ClickException:
    return click.ClickException(f"{flag}: {why}")


# Parsing one flag value -----------------------------------------------------------------------


def _quantity(flag: str, text: str) -> quantities.Quantity:
    try:
        quantity = quantities.parse_quantity(text)
    except errors.QuantityError as exc:
        raise _fail(flag, str(exc)) from None
    if quantity.milli < 0:
        raise _fail(flag, f"{text!r} is negative: a reservation holds zero or more")
    return quantity


def _qualified_name(flag: str, text: str, *, what: str) -> str:
    """A Kubernetes qualified name (``[prefix/]name``): label keys, resource names."""
    prefix, _, name = text.rpartition("/")
    if (
        not name
        or len(name) > 63
        or not _NAME_PART.fullmatch(name)
        or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)))
        or text.startswith("/")
    ):
        raise _fail(
            flag,
            f"{text!r} is not a valid {what}: use letters, digits, '-', '_' and '.', starting "
            "and ending with a letter or digit, optionally after a DNS prefix and '/'",
        )
    return text


def _label_value(flag: str, text: str) -> str:
    if text and (len(text) > 63 or not _NAME_PART.fullmatch(text)):
        raise _fail(
            flag,
            f"{text!r} is not a valid label value: at most 63 letters, digits, '-', '_' and "
            "'.', starting and ending with a letter or digit",
        )
    return text


def _pair(flag: str, text: str, *, example: str, form: str = "KEY=VALUE") -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise _fail(flag, f"{text!r} is not {form}, e.g. {example}")
    return key, value


def _labels(flag: str, texts: collections.abc.Iterable[str], *, example: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for text in texts:
        key, value = _pair(flag, text, example=example)
        _qualified_name(flag, key, what="label key")
        if key in labels and labels[key] != value:
            raise _fail(flag, f"label {key!r} is given twice with different values")
        labels[key] = _label_value(flag, value)
    return labels


def _selector(text: str) -> dict[str, str]:
    flag = "--owner-selector"
    terms = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in terms):
        raise _fail(flag, f"{text!r} is not a selector: write KEY=VALUE[,KEY=VALUE...]")
    return _labels(flag, terms, example="app=train,team=nlp")


def _object_name(flag: str, text: str, *, what: str) -> str:
    """The name of an object: a DNS subdomain (pods, controllers, queues, the reservation)."""
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        raise _fail(flag, f"{text!r} is not a valid {what} name: {_NAME_RULE}")
    return text


def _controller(text: str) -> dict[str, str]:
    flag = "--owner-controller"
    kind, sep, name = text.partition("/")
    if not sep or not kind or not name or "/" in name:
        raise _fail(flag, f"{text!r} is not KIND/NAME, e.g. Job/train or StatefulSet/workers")
    kind = _CONTROLLER_KINDS.get(kind, kind)
    if not kind[:1].isupper():
        raise _fail(
            flag,
            f"{kind!r} is not a kind: write it as in the pods' ownerReferences, e.g. Job, "
            "StatefulSet, MPIJob",
        )
    return {"kind": kind, "name": _object_name(flag, name, what=kind)}


def _toleration(text: str) -> core.Toleration:
    """``key=value:Effect``, ``key:Effect`` (any value), ``key=value`` or ``key`` (any effect)."""
    flag = "--toleration"
    head, sep, effect = text.rpartition(":") if ":" in text else (text, "", "")
    if sep and effect not in _EFFECTS:
        raise _fail(flag, f"{effect!r} is not a taint effect: use {', '.join(sorted(_EFFECTS))}")
    key, has_value, value = head.partition("=")
    toleration: core.Toleration = {}
    if key:
        toleration["key"] = _qualified_name(flag, key, what="taint key")
    elif has_value:
        raise _fail(flag, f"{text!r} has a value but no key: write KEY=VALUE:EFFECT")
    if has_value:
        toleration |= {"operator": "Equal", "value": _label_value(flag, value)}
    else:
        toleration["operator"] = "Exists"
    if effect:
        toleration["effect"] = effect
    return toleration


def _future(flag: str, text: str, *, now: float) -> str:
    """An RFC 3339 time still ahead (this client has a clock; the API server's rules have none)."""
    try:
        when = meta.parse_timestamp(text)
    except ValueError as exc:
        raise _fail(flag, str(exc)) from None
    if when.timestamp() <= now:
        raise _fail(flag, f"{text} has already passed: give a time in the future")
    return meta.format_timestamp(when)


def _requests(flags: Flags) -> dict[str, str]:
    named = {
        "--cpu": (resources.CPU, flags.cpu),
        "--memory": (resources.MEMORY, flags.memory),
        "--gpu": (resources.GPU, flags.gpu),
    }
    requests: dict[str, str] = {}
    given_by: dict[str, str] = {}
    for flag, (name, text) in named.items():
        if text is not None:
            _quantity(flag, text)
            requests[name], given_by[name] = text, flag
    for text in flags.resource:
        name, value = _pair("--resource", text, example="example.com/fpga=1", form="NAME=QUANTITY")
        _qualified_name("--resource", name, what="resource name")
        _quantity("--resource", value)
        if name in requests:
            raise _fail("--resource", f"{name} is already given by {given_by[name]}")
        requests[name], given_by[name] = value, "--resource"
    if not any(quantities.parse_milli(v) > 0 for v in requests.values()):
        raise click.ClickException(
            "nothing to reserve: give --cpu, --memory, --gpu or --resource NAME=QUANTITY"
        )
    return requests


# Building the Reservation ---------------------------------------------------------------------


def build(flags: Flags, *, namespace: str | None, clock: clocks.Clock) -> reservations.Reservation:
    """The Reservation the flags describe, validated by the API models.

    ``namespace`` goes into the metadata when not None. Raises ``click.ClickException`` with a
    one-line message naming the flag to change.
    """
    _object_name("NAME", flags.name, what="reservation")
    owners: list[custom_objects.ReservationOwner] = [
        {"object": {"name": _object_name("--owner-pod", p, what="pod")}} for p in flags.owner_pod
    ]
    owners += [{"controller": _controller(c)} for c in flags.owner_controller]
    owners += [{"labelSelector": {"matchLabels": _selector(s)}} for s in flags.owner_selector]
    if not owners:
        raise click.ClickException(
            "a reservation needs at least one owner: give --owner-pod NAME, "
            "--owner-controller KIND/NAME or --owner-selector KEY=VALUE"
        )
    if flags.ttl is not None and flags.expires is not None:
        raise click.ClickException("give --ttl or --expires, not both")
    pod_spec: core.PodSpec = {
        "containers": [{"name": CONTAINER, "resources": {"requests": _requests(flags)}}]
    }
    if flags.node_selector:
        pod_spec["nodeSelector"] = _labels(
            "--node-selector", flags.node_selector, example="pool=gpu"
        )
    if flags.toleration:
        pod_spec["tolerations"] = [_toleration(t) for t in flags.toleration]
    spec: custom_objects.ReservationSpec = {"template": {"spec": pod_spec}, "owners": owners}
    if flags.ttl is not None:
        try:
            spec["ttl"] = str(durations.parse_duration(flags.ttl))
        except errors.DurationError as exc:
            raise _fail("--ttl", str(exc)) from None
    if flags.expires is not None:
        spec["expires"] = _future("--expires", flags.expires, now=clock.now())
    if flags.start_at is not None:
        spec["startAt"] = _future("--start-at", flags.start_at, now=clock.now())
    if flags.queue is not None:
        spec["queue"] = _object_name("--queue", flags.queue, what="queue")
    if flags.allocate_once is not None:
        spec["allocateOnce"] = flags.allocate_once
    metadata = {"name": flags.name} | ({"namespace": namespace} if namespace else {})
    try:
        return reservations.Reservation.model_validate({"metadata": metadata, "spec": spec})
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["loc"][:2] == ("spec", "startAt") or first["loc"][:2] == ("spec", "start_at"):
            raise _fail("--start-at", str(first["msg"]).removeprefix("Value error, ")) from None
        raise click.ClickException(f"invalid reservation: {where}: {first['msg']}") from None


# Output ---------------------------------------------------------------------------------------


def _render(obj: custom_objects.Reservation, *, name: str, output: str | None, note: str) -> str:
    ref = f"{RESOURCE}/{(obj.get('metadata') or {}).get('name') or name}"
    if output == "name":
        return ref
    if output == "json":
        return json.dumps(obj, indent=4)  # kubectl's -o json indentation
    if output == "yaml":
        return yaml.safe_dump(dict(obj), sort_keys=True, default_flow_style=False).rstrip("\n")
    return f"{ref} created{note}"


# The command ----------------------------------------------------------------------------------

_EXAMPLES = """
\b
Examples:
  # Hold 4 CPUs, 8 GiB of memory and a GPU for 2 hours for the pods labelled app=train
  kubectl create reservation r1 --cpu 4 --memory 8Gi --gpu 1 --owner-selector app=train --ttl 2h

\b
  # Hold capacity on a GPU pool node for the pods of Job "nightly" until a given time
  kubectl create reservation nightly --cpu 16 --resource nvidia.com/gpu=8 \\
      --owner-controller Job/nightly --node-selector pool=gpu \\
      --toleration dedicated=gpu:NoSchedule --expires 2030-01-01T06:00:00Z

\b
  # Keep holding after the first owner starts, counted against queue team-a
  kubectl create reservation warm --cpu 2 --owner-pod web-0 --no-allocate-once --queue team-a

\b
  # Print the Reservation without creating it
  kubectl create reservation r1 --cpu 4 --owner-pod trainer-0 --dry-run=client -o yaml
"""


@click.command(
    name="reservation",
    epilog=_EXAMPLES,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("name")
@click.option("--cpu", metavar="QUANTITY", help="CPU to hold, e.g. 500m or 4.")
@click.option("--memory", metavar="QUANTITY", help="Memory to hold, e.g. 8Gi.")
@click.option("--gpu", metavar="QUANTITY", help=f"GPUs to hold ({resources.GPU}).")
@click.option(
    "--resource",
    metavar="NAME=QUANTITY",
    multiple=True,
    help="Any other resource to hold, e.g. example.com/fpga=1. Repeatable.",
)
@click.option(
    "--owner-pod", metavar="NAME", multiple=True, help="A pod that may use it. Repeatable."
)
@click.option(
    "--owner-controller",
    metavar="KIND/NAME",
    multiple=True,
    help="Pods controlled by this object may use it, e.g. Job/train. Repeatable.",
)
@click.option(
    "--owner-selector",
    metavar="KEY=VALUE,...",
    multiple=True,
    help="Pods with all these labels may use it, e.g. app=train. Repeatable (one owner each).",
)
@click.option(
    "--ttl",
    metavar="DURATION",
    help="How long it lives, e.g. 2h or 90m; 0 never expires. Default 24h.",
)
@click.option(
    "--expires", metavar="TIME", help="When it expires (RFC 3339, e.g. 2026-12-24T06:00:00Z)."
)
@click.option(
    "--start-at",
    metavar="TIME",
    help="Hold nothing until then (RFC 3339), e.g. to book a big run for tonight; a node is "
    "drained for it ahead. --ttl counts from then.",
)
@click.option(
    "--node-selector",
    metavar="KEY=VALUE",
    multiple=True,
    help="Hold it on a node with this label. Repeatable.",
)
@click.option(
    "--toleration",
    metavar="KEY[=VALUE][:EFFECT]",
    multiple=True,
    help="Tolerate a taint, e.g. dedicated=gpu:NoSchedule (no =VALUE: any value). Repeatable.",
)
@click.option("--queue", metavar="NAME", help="Queue the held capacity counts against.")
@click.option(
    "--allocate-once/--no-allocate-once",
    default=None,
    help="End it when its first owner starts (the default), or keep holding for more owners.",
)
@kubectl_common.namespace_option
@kubectl_common.connection_options
@click.option(
    "--dry-run",
    type=click.Choice(["none", "client", "server"]),
    default="none",
    show_default=True,
    help="client: only print it; server: have the API server validate it without storing it.",
)
@click.option(
    "-o", "--output", type=click.Choice(["yaml", "json", "name"]), help="Print the object so."
)
@kubectl_common.verbosity_option
def command(
    name: str,
    *,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    dry_run: str,
    output: str | None,
    verbosity: int,
    **shape: typing.Any,
) -> None:
    """Create a Reservation: capacity on one node held for the pods it names, its owners.

    Berth schedules the Reservation like a pod of the requested size, then keeps that capacity
    free for the owners (and for no one else) until the first owner uses it, its time runs
    out, or it is deleted.
    """
    del verbosity  # read by main() before parsing, so that parse errors honour it too
    flags = Flags(name=name, **shape)
    # Built (and so validated) before connecting: a bad flag is reported even without a cluster.
    reservation = build(flags, namespace=namespace, clock=clocks.SystemClock())
    if dry_run == "client":
        # The API model's JSON is a Reservation as the API server holds it.
        shown = typing.cast(custom_objects.Reservation, reservation.to_api())
        click.echo(_render(shown, name=name, output=output, note=" (dry run)"))
        return
    with clients.connect(kubeconfig=kubeconfig, context=context) as connection:
        target = namespace or connection.namespace
        body = reservation.to_api()
        body["metadata"]["namespace"] = target
        created = clients.create(
            connection,
            body=body,
            plural=reservations.PLURAL,
            namespace=target,
            dry_run=dry_run == "server",
        )
    note = " (server dry run)" if dry_run == "server" else ""
    # The API server answers with the Reservation it stored.
    stored = typing.cast(custom_objects.Reservation, created)
    click.echo(_render(stored, name=name, output=output, note=note))


# Entry point ----------------------------------------------------------------------------------


def main(argv: collections.abc.Sequence[str] | None = None) -> typing.NoReturn:
    """The console script: run the command, turn every failure into one line and an exit code."""
    kubectl_common.run(command, prog=PROG, argv=argv)
