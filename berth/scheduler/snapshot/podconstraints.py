"""A pod's constraints on other pods and on node ports, parsed once, and the fields it uses.

Owns the frozen forms of ``spec.affinity.podAffinity``/``podAntiAffinity`` (:class:`AffinityTerm`,
:class:`WeightedTerm`, :class:`PodAffinity`), ``spec.topologySpreadConstraints``
(:class:`SpreadConstraint`) and the host ports of a pod's containers (:class:`HostPort`), with
Kubernetes' meaning of a label selector on one pod's labels (:class:`LabelSelector`):

- ``matchLabels`` and ``matchExpressions`` (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``)
  are ANDed; an empty selector matches every pod, an absent one (``None``) none;
- a term's ``namespaces`` and ``namespaceSelector`` are resolved against the pod that owns the
  term: neither set means the owner's namespace, an empty ``namespaceSelector`` every namespace;
- ``matchLabelKeys``/``mismatchLabelKeys`` are merged into the selector with the owner's label
  values (``In``/``NotIn``), as the API server and kube-scheduler do; keys the owner lacks are
  ignored;
- host ports: protocol ``TCP`` and host IP ``0.0.0.0`` by default; with ``hostNetwork`` a
  container port is its own host port.

Malformed input never raises: :func:`parse` returns the problems, each naming the field, and
the pod is then reported unschedulable with them. :class:`Field` lists every pod field that
constrains placement beyond node selection and resources; :func:`parse` reports which of them a
pod uses, so that the framework can refuse a pod using one no enabled plugin implements.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import typing

from berth.api import core
from berth.api import reservations as api_reservations
from berth.scheduler.snapshot import selectors, wire

__all__ = [
    "DO_NOT_SCHEDULE",
    "EMPTY",
    "SCHEDULE_ANYWAY",
    "AffinityTerm",
    "Constraints",
    "Field",
    "HostPort",
    "LabelSelector",
    "PodClaim",
    "PodAffinity",
    "SpreadConstraint",
    "WeightedTerm",
    "parse",
    "parse_label_selector",
    "parse_selector_field",
    "ports_conflict",
]

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
_HONOR, _IGNORE = "Honor", "Ignore"
_LABEL_OPERATORS = frozenset(
    {selectors.IN, selectors.NOT_IN, selectors.EXISTS, selectors.DOES_NOT_EXIST}
)
_ANY_IP = "0.0.0.0"
_MAX_PORT = 65535


class Field(enum.StrEnum):
    """A pod field that constrains where the pod may run, beyond node selection and resources.

    Plugins declare the fields they implement; the value is the path users read in reasons.
    """

    POD_AFFINITY = "spec.affinity.podAffinity"
    POD_ANTI_AFFINITY = "spec.affinity.podAntiAffinity"
    NAMESPACE_SELECTOR = "spec.affinity.pod(Anti)Affinity namespaceSelector"  # with labels
    TOPOLOGY_SPREAD = "spec.topologySpreadConstraints"
    HOST_PORTS = "spec.containers[].ports[].hostPort"
    RESOURCE_CLAIMS = "spec.resourceClaims"
    POD_RESOURCES = "spec.resources"
    PERSISTENT_VOLUME_CLAIM = "spec.volumes[].persistentVolumeClaim"
    EPHEMERAL_VOLUME = "spec.volumes[].ephemeral"
    CSI_VOLUME = "spec.volumes[].csi"
    IN_TREE_DISK = "spec.volumes[] in-tree disk (gcePersistentDisk, awsElasticBlockStore, ...)"
    GPU_SHARING = "metadata.annotations gpu-fraction / gpu-memory (a share of a GPU)"


# Volume sources kube-scheduler's volume plugins look at (binding, restrictions, attach limits).
_VOLUME_FIELDS: dict[str, Field] = {
    "persistentVolumeClaim": Field.PERSISTENT_VOLUME_CLAIM,
    "ephemeral": Field.EPHEMERAL_VOLUME,
    "csi": Field.CSI_VOLUME,
    "gcePersistentDisk": Field.IN_TREE_DISK,
    "awsElasticBlockStore": Field.IN_TREE_DISK,
    "azureDisk": Field.IN_TREE_DISK,
    "cinder": Field.IN_TREE_DISK,
    "rbd": Field.IN_TREE_DISK,
    "iscsi": Field.IN_TREE_DISK,
}


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: requirements ANDed (``matchLabels`` become ``In``)."""

    requirements: tuple[selectors.Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        """Matches every pod."""
        return not self.requirements

    def matches(self, labels: collections.abc.Mapping[str, str], /) -> bool:
        """Whether ``labels`` satisfy every requirement."""
        for req in self.requirements:
            if not selectors.requirement_matches(req, value=labels.get(req.key)):
                return False
        return True

    def merged(self, more: collections.abc.Iterable[selectors.Requirement]) -> LabelSelector:
        """This selector with ``more`` requirements ANDed in."""
        extra = tuple(more)
        return LabelSelector(self.requirements + extra) if extra else self


@dataclasses.dataclass(frozen=True)
class AffinityTerm:
    """One pod (anti-)affinity term, its namespaces resolved against the pod owning it."""

    selector: LabelSelector | None  # None: matches no pod
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None  # None: not set; empty: every namespace
    topology_key: str

    def matches(
        self,
        namespace: str,
        labels: collections.abc.Mapping[str, str],
        /,
        *,
        namespace_labels: collections.abc.Mapping[str, collections.abc.Mapping[str, str]]
        | None = None,
    ) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is one this term is about.

        ``namespace_labels`` (namespace -> labels) serves a ``namespaceSelector``; a namespace
        it does not know has no labels.
        """
        if self.selector is None:
            return False
        if namespace not in self.namespaces:
            ns_selector = self.namespace_selector
            if ns_selector is None:
                return False
            if not ns_selector.empty:
                known = namespace_labels.get(namespace) if namespace_labels is not None else None
                if not ns_selector.matches(known or {}):
                    return False
        return self.selector.matches(labels)


@dataclasses.dataclass(frozen=True)
class WeightedTerm:
    """A preferred term: weight 1..100."""

    weight: int
    term: AffinityTerm


@dataclasses.dataclass(frozen=True)
class PodAffinity:
    """A pod's inter-pod affinity and anti-affinity."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


@dataclasses.dataclass(frozen=True)
class SpreadConstraint:
    """One topology spread constraint; ``selector`` already holds ``matchLabelKeys``."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (True) or ScheduleAnyway
    selector: LabelSelector | None  # None: matches no pod
    min_domains: int | None = None
    honor_node_affinity: bool = True  # nodeAffinityPolicy (default Honor)
    honor_taints: bool = False  # nodeTaintsPolicy (default Ignore)


@dataclasses.dataclass(frozen=True)
class HostPort:
    """One host port a container binds."""

    protocol: str
    ip: str
    port: int


def ports_conflict(a: HostPort, b: HostPort, /) -> bool:
    """Two host ports cannot share a node: same protocol and port, and overlapping IPs."""
    return (
        a.port == b.port
        and a.protocol == b.protocol
        and (a.ip == b.ip or a.ip == _ANY_IP or b.ip == _ANY_IP)
    )


@dataclasses.dataclass(frozen=True)
class PodClaim:
    """A PersistentVolumeClaim a pod's volume uses: ``persistentVolumeClaim.claimName``, or
    the claim a generic ephemeral volume gets (``<pod name>-<volume name>``)."""

    name: str  # in the pod's namespace
    field: str  # where the pod names it, for reasons
    ephemeral: bool = False


@dataclasses.dataclass(frozen=True)
class Constraints:
    """What :func:`parse` found in one pod."""

    affinity: PodAffinity | None = None
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    claims: tuple[PodClaim, ...] = ()
    uses: frozenset[Field] = frozenset()
    problems: tuple[str, ...] = ()  # each names the field; the pod can never be placed


EMPTY = Constraints()


# Parsing ------------------------------------------------------------------------------------


class _Problems:
    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, field: str, message: str) -> None:
        self.found.append(f"invalid {field}: {message}")


def parse_label_selector(
    raw: typing.Any, /, *, field: str, problems: _Problems | None = None
) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` (``None`` when absent); malformed parts go to ``problems``."""
    if raw is None:
        return None
    sink = problems if problems is not None else _Problems()
    if not isinstance(raw, collections.abc.Mapping):
        sink.add(field, "not an object")
        return None
    reqs: list[selectors.Requirement] = []
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, collections.abc.Mapping):
        sink.add(f"{field}.matchLabels", "not a map")
    else:
        for key, value in sorted(match_labels.items()):
            reqs.append(selectors.Requirement(str(key), selectors.IN, (str(value),)))
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        sink.add(f"{field}.matchExpressions", "not a list")
        expressions = []
    for i, req in enumerate(selectors.parse_requirements(expressions)):
        where = f"{field}.matchExpressions[{i}]"
        if not req.key:
            sink.add(where, "key is empty")
        elif req.operator not in _LABEL_OPERATORS:
            sink.add(where, f"operator {req.operator!r} is not In, NotIn, Exists or DoesNotExist")
        elif not req.valid:
            # As the API server says it of Berth's own kinds (the CRDs' rule).
            wants = (
                api_reservations.VALUES_REQUIRED
                if req.operator in (selectors.IN, selectors.NOT_IN)
                else api_reservations.VALUES_FORBIDDEN
            )
            sink.add(where, f"{wants} (operator {req.operator} with values {list(req.values)})")
        reqs.append(req)
    return LabelSelector(tuple(reqs))


def parse_selector_field(
    raw: typing.Any, /, *, field: str
) -> tuple[LabelSelector | None, tuple[str, ...]]:
    """A ``metav1.LabelSelector`` of some object's ``field`` and its problems, each naming its
    field (for objects other than pods, e.g. a PodGroup's ``spec.subGroups[1].selector``)."""
    problems = _Problems()
    selector = parse_label_selector(raw, field=field, problems=problems)
    return selector, tuple(problems.found)


def _label_keys(
    raw: typing.Any,
    /,
    *,
    field: str,
    operator: str,
    labels: collections.abc.Mapping[str, str],
    problems: _Problems,
) -> list[selectors.Requirement]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        problems.add(field, "not a list of label keys")
        return []
    return [selectors.Requirement(key, operator, (labels[key],)) for key in raw if key in labels]


def _affinity_term(
    raw: typing.Any,
    /,
    *,
    field: str,
    namespace: str,
    labels: collections.abc.Mapping[str, str],
    problems: _Problems,
    uses: set[Field],
) -> AffinityTerm | None:
    if not isinstance(raw, collections.abc.Mapping):
        problems.add(field, "not an object")
        return None
    topology_key = raw.get("topologyKey")
    if not isinstance(topology_key, str) or not topology_key:
        problems.add(f"{field}.topologyKey", "must be a non-empty label key")
        topology_key = ""
    selector = parse_label_selector(
        raw.get("labelSelector"), field=f"{field}.labelSelector", problems=problems
    )
    extra = _label_keys(
        raw.get("matchLabelKeys"),
        field=f"{field}.matchLabelKeys",
        operator=selectors.IN,
        labels=labels,
        problems=problems,
    ) + _label_keys(
        raw.get("mismatchLabelKeys"),
        field=f"{field}.mismatchLabelKeys",
        operator=selectors.NOT_IN,
        labels=labels,
        problems=problems,
    )
    if selector is not None:
        selector = selector.merged(extra)
    names = raw.get("namespaces") or []
    if not isinstance(names, list):
        problems.add(f"{field}.namespaces", "not a list")
        names = []
    ns_selector = parse_label_selector(
        raw.get("namespaceSelector"), field=f"{field}.namespaceSelector", problems=problems
    )
    if ns_selector is not None and not ns_selector.empty:
        uses.add(Field.NAMESPACE_SELECTOR)
    namespaces = frozenset(str(n) for n in names)
    if not namespaces and ns_selector is None:
        namespaces = frozenset({namespace})
    return AffinityTerm(
        selector=selector,
        namespaces=namespaces,
        namespace_selector=ns_selector,
        topology_key=topology_key,
    )


def _terms(
    raw: typing.Any,
    /,
    *,
    field: str,
    weighted: bool,
    namespace: str,
    labels: collections.abc.Mapping[str, str],
    problems: _Problems,
    uses: set[Field],
) -> list[typing.Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.add(field, "not a list")
        return []
    out: list[typing.Any] = []
    for i, item in enumerate(raw):
        where = f"{field}[{i}]"
        if not weighted:
            term = _affinity_term(
                item, field=where, namespace=namespace, labels=labels, problems=problems, uses=uses
            )
            if term is not None:
                out.append(term)
            continue
        if not isinstance(item, collections.abc.Mapping):
            problems.add(where, "not an object")
            continue
        weight = item.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            problems.add(f"{where}.weight", f"{weight!r} is not between 1 and 100")
            continue
        term = _affinity_term(
            item.get("podAffinityTerm"),
            field=f"{where}.podAffinityTerm",
            namespace=namespace,
            labels=labels,
            problems=problems,
            uses=uses,
        )
        if term is not None:
            out.append(WeightedTerm(weight=weight, term=term))
    return out


def _pod_affinity(
    affinity: core.Affinity,
    /,
    *,
    namespace: str,
    labels: collections.abc.Mapping[str, str],
    problems: _Problems,
    uses: set[Field],
) -> PodAffinity | None:
    parts: dict[str, list[typing.Any]] = {}
    for kind, field, name in (
        ("podAffinity", Field.POD_AFFINITY, "affinity"),
        ("podAntiAffinity", Field.POD_ANTI_AFFINITY, "anti_affinity"),
    ):
        raw = affinity.get(kind)
        if raw is None:
            continue
        if not isinstance(raw, collections.abc.Mapping):
            problems.add(f"spec.affinity.{kind}", "not an object")
            continue
        base = f"spec.affinity.{kind}"
        required = _terms(
            raw.get("requiredDuringSchedulingIgnoredDuringExecution"),
            field=f"{base}.requiredDuringSchedulingIgnoredDuringExecution",
            weighted=False,
            namespace=namespace,
            labels=labels,
            problems=problems,
            uses=uses,
        )
        preferred = _terms(
            raw.get("preferredDuringSchedulingIgnoredDuringExecution"),
            field=f"{base}.preferredDuringSchedulingIgnoredDuringExecution",
            weighted=True,
            namespace=namespace,
            labels=labels,
            problems=problems,
            uses=uses,
        )
        if required or preferred:
            uses.add(field)
        parts[f"required_{name}"] = required
        parts[f"preferred_{name}"] = preferred
    found = PodAffinity(**{k: tuple(v) for k, v in parts.items()})
    return found if found else None


def _spread(
    raw: typing.Any,
    /,
    *,
    labels: collections.abc.Mapping[str, str],
    problems: _Problems,
) -> list[SpreadConstraint]:
    field = "spec.topologySpreadConstraints"
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.add(field, "not a list")
        return []
    out: list[SpreadConstraint] = []
    for i, item in enumerate(raw):
        where = f"{field}[{i}]"
        if not isinstance(item, collections.abc.Mapping):
            problems.add(where, "not an object")
            continue
        before = len(problems.found)
        max_skew = item.get("maxSkew")
        if not isinstance(max_skew, int) or isinstance(max_skew, bool) or max_skew < 1:
            problems.add(f"{where}.maxSkew", f"{max_skew!r} is not an integer of at least 1")
        key = item.get("topologyKey")
        if not isinstance(key, str) or not key:
            problems.add(f"{where}.topologyKey", "must be a non-empty label key")
        when = item.get("whenUnsatisfiable")
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            problems.add(
                f"{where}.whenUnsatisfiable", f"{when!r} is not DoNotSchedule or ScheduleAnyway"
            )
        min_domains = item.get("minDomains")
        if min_domains is not None:
            if not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains < 1:
                problems.add(f"{where}.minDomains", f"{min_domains!r} is not at least 1")
            elif when != DO_NOT_SCHEDULE:
                problems.add(f"{where}.minDomains", "only allowed with DoNotSchedule")
        policies: dict[str, bool] = {}
        for name, default in (("nodeAffinityPolicy", _HONOR), ("nodeTaintsPolicy", _IGNORE)):
            value = item.get(name) or default
            if value not in (_HONOR, _IGNORE):
                problems.add(f"{where}.{name}", f"{value!r} is not Honor or Ignore")
            policies[name] = value == _HONOR
        selector = parse_label_selector(
            item.get("labelSelector"), field=f"{where}.labelSelector", problems=problems
        )
        extra = _label_keys(
            item.get("matchLabelKeys"),
            field=f"{where}.matchLabelKeys",
            operator=selectors.IN,
            labels=labels,
            problems=problems,
        )
        if selector is not None:
            selector = selector.merged(extra)
        if len(problems.found) > before:
            continue
        out.append(
            SpreadConstraint(
                max_skew=typing.cast(int, max_skew),
                topology_key=typing.cast(str, key),
                hard=when == DO_NOT_SCHEDULE,
                selector=selector,
                min_domains=typing.cast("int | None", min_domains),
                honor_node_affinity=policies["nodeAffinityPolicy"],
                honor_taints=policies["nodeTaintsPolicy"],
            )
        )
    return out


def _containers(spec: core.PodSpec) -> list[tuple[str, core.Container]]:
    out: list[tuple[str, core.Container]] = []
    for field, items, sidecars_only in (
        ("containers", spec.get("containers"), False),
        ("initContainers", spec.get("initContainers"), True),
    ):
        if not isinstance(items, list):
            continue
        for i, container in enumerate(items):
            if not isinstance(container, collections.abc.Mapping):
                continue
            if sidecars_only and container.get("restartPolicy") != "Always":
                continue  # a plain init container has exited before the app ports open
            out.append((f"spec.{field}[{i}]", container))
    return out


def _host_ports(spec: core.PodSpec, /, *, problems: _Problems) -> list[HostPort]:
    host_network = spec.get("hostNetwork") is True
    out: list[HostPort] = []
    for where, container in _containers(spec):
        ports = container.get("ports")
        if not isinstance(ports, list):
            continue
        for j, port in enumerate(ports):
            if not isinstance(port, collections.abc.Mapping):
                continue
            host_port = port.get("hostPort")
            if host_port is None and host_network:
                host_port = port.get("containerPort")  # the API server's defaulting
            if host_port is None or host_port == 0:
                continue
            field = f"{where}.ports[{j}].hostPort"
            if not isinstance(host_port, int) or isinstance(host_port, bool):
                problems.add(field, f"{host_port!r} is not a port number")
                continue
            if not 1 <= host_port <= _MAX_PORT:
                problems.add(field, f"{host_port} is not between 1 and {_MAX_PORT}")
                continue
            protocol = str(port.get("protocol") or "TCP")
            ip = str(port.get("hostIP") or _ANY_IP)
            out.append(HostPort(protocol=protocol, ip=ip, port=host_port))
    return sorted(set(out), key=lambda p: (p.port, p.protocol, p.ip))


def _claims(volumes: list[typing.Any], /, *, pod: str, problems: _Problems) -> list[PodClaim]:
    out: list[PodClaim] = []
    for i, volume in enumerate(volumes):
        if not isinstance(volume, collections.abc.Mapping):
            continue
        where = f"spec.volumes[{i}]"
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, collections.abc.Mapping):
            name = source.get("claimName")
            field = f"{where}.persistentVolumeClaim.claimName"
            if not isinstance(name, str) or not name:
                problems.add(field, "must name a PersistentVolumeClaim")
                continue
            out.append(PodClaim(name=name, field=field))
        elif volume.get("ephemeral") is not None:
            name = volume.get("name")
            if not isinstance(name, str) or not name:
                problems.add(f"{where}.name", "an ephemeral volume needs a name")
                continue
            out.append(PodClaim(name=f"{pod}-{name}", field=f"{where}.ephemeral", ephemeral=True))
    return out


def parse(
    spec: core.PodSpec,
    /,
    *,
    namespace: str,
    labels: collections.abc.Mapping[str, str],
    name: str = "",
) -> Constraints:
    """The constraints in a pod's ``spec`` (the pod ``name`` lives in ``namespace`` with
    ``labels``)."""
    problems = _Problems()
    uses: set[Field] = set()
    affinity = _pod_affinity(
        wire.part(spec.get("affinity")),
        namespace=namespace,
        labels=labels,
        problems=problems,
        uses=uses,
    )
    spread = _spread(spec.get("topologySpreadConstraints"), labels=labels, problems=problems)
    if spread or spec.get("topologySpreadConstraints"):
        uses.add(Field.TOPOLOGY_SPREAD)
    host_ports = _host_ports(spec, problems=problems)
    if host_ports:
        uses.add(Field.HOST_PORTS)
    if spec.get("resourceClaims"):
        uses.add(Field.RESOURCE_CLAIMS)
    if spec.get("resources"):
        uses.add(Field.POD_RESOURCES)
    volumes = spec.get("volumes")
    claims: list[PodClaim] = []
    if isinstance(volumes, list):
        for volume in volumes:
            if isinstance(volume, collections.abc.Mapping):
                uses.update(f for key, f in _VOLUME_FIELDS.items() if volume.get(key))
        claims = _claims(volumes, pod=name, problems=problems)
    if affinity is None and not spread and not host_ports and not uses and not problems.found:
        return EMPTY
    return Constraints(
        affinity=affinity,
        spread=tuple(spread),
        host_ports=tuple(host_ports),
        claims=tuple(claims),
        uses=frozenset(uses),
        problems=tuple(problems.found),
    )
