"""What every Kubernetes object shares as it crosses the wire: typed records (``meta/v1``).

``ObjectMeta``, owner references, ``metav1.Condition``, label selectors, lists, watch events and
the API server's ``Status`` answer, spelt exactly as the API server serves them (camelCase
keys). They are typed dicts: the API's JSON is decoded once and handed around unchanged, and
the kinds' records (:mod:`berth.api.core`, :mod:`berth.api.coordination`,
:mod:`berth.api.dra`, :mod:`berth.api.custom_objects`) build on :class:`KubeObject`.

``total=False`` throughout: the API server omits empty fields, so a reader must expect any of
them to be absent (``obj.get("metadata", {})``). A record is a promise about the keys Berth
reads, not a validator: parsing (and refusing bad values with the field's name) stays with the
snapshot's infos and the pydantic models. :func:`part` and :func:`parts` read a record's nested
fields one checked step at a time; the scheduler's snapshot and the emulator's controllers both
read user objects through them.
"""

from __future__ import annotations

import collections.abc
import typing

import typing_extensions

__all__ = [
    "Condition",
    "ForeignObject",
    "JSONObject",
    "KubeObject",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ListMeta",
    "ObjectList",
    "ObjectMeta",
    "OwnerReference",
    "Status",
    "StatusDetails",
    "Table",
    "TableCell",
    "TableColumnDefinition",
    "TableRow",
    "WatchEvent",
    "part",
    "parts",
]


class OwnerReference(typing_extensions.TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(typing_extensions.TypedDict, total=False):
    """The ``metadata`` fields Berth reads and writes."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]


class KubeObject(typing_extensions.TypedDict, total=False):
    """Any object of any kind: what informers, watches and lists hand on before a kind's reader
    looks at it. ``kind`` and ``apiVersion`` are read-only so that a kind's record may name its
    own ``kind`` exactly (``typing.Literal["DeviceClass"]``) and still be a ``KubeObject``."""

    apiVersion: typing_extensions.ReadOnly[str]
    kind: typing_extensions.ReadOnly[str]
    metadata: ObjectMeta


JSONObject = collections.abc.Mapping[str, object]
"""A JSON object whose schema another project owns (a Job's or a RayCluster's spec): its
values are ``object``, so a reader must check each field's type where it reads it
(:mod:`berth.workloads.fields` does, naming the field)."""


class ForeignObject(KubeObject, total=False):
    """An object of a kind another project owns (a Job, a JobSet, a Kubeflow job, a RayCluster,
    a Volcano or scheduler-plugins PodGroup...): its metadata as every object's, its ``spec``
    and ``status`` as that project's JSON. Berth reads a handful of their fields, in several
    versions and as users wrote them, so they are checked where read rather than promised
    here: a bad value is a clear error naming the field, never a crash."""

    spec: JSONObject
    status: JSONObject


class Condition(typing_extensions.TypedDict, total=False):
    """``metav1.Condition``: what Queue, PodGroup and Reservation statuses carry."""

    type: str
    status: str  # "True", "False", "Unknown"
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


class LabelSelectorRequirement(typing_extensions.TypedDict, total=False):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: list[str]


class LabelSelector(typing_extensions.TypedDict, total=False):
    matchLabels: dict[str, str]
    matchExpressions: list[LabelSelectorRequirement]


ListMeta = typing_extensions.TypedDict(
    "ListMeta", {"resourceVersion": str, "continue": str, "remainingItemCount": int}, total=False
)
"""A list's ``metadata``: the version to watch from, and the token of the next page."""


class ObjectList(typing_extensions.TypedDict, total=False):
    """One page of a list (``PodList``, ``QueueList``...)."""

    apiVersion: str
    kind: str
    metadata: ListMeta
    items: list[KubeObject]


class WatchEvent(typing_extensions.TypedDict):
    """One line of a watch: ``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK`` or ``ERROR`` (whose
    object is a :class:`Status`)."""

    type: str
    object: KubeObject


class StatusDetails(typing_extensions.TypedDict, total=False):
    name: str
    group: str
    kind: str
    uid: str
    causes: list[dict[str, str]]  # {reason, message, field}, each a string
    retryAfterSeconds: int


class Status(typing_extensions.TypedDict, total=False):
    """The API server's answer to a failed request (and to a delete): ``meta/v1`` Status."""

    apiVersion: str
    kind: str
    metadata: ListMeta
    status: str  # "Success" or "Failure"
    message: str
    reason: str  # NotFound, AlreadyExists, Conflict, Invalid, Forbidden, ...
    details: StatusDetails
    code: int


# Server-side printing (``meta.k8s.io/v1``): what ``kubectl get`` asks for ---------------------


class TableColumnDefinition(typing_extensions.TypedDict, total=False):
    name: str
    type: str  # string, integer, number, boolean, date
    format: str  # "name" marks the column kubectl keys on
    description: str
    priority: int  # 0: always shown; 1: only with -o wide


TableCell = str | int | float | bool | None
"""One cell of a row: a JSON scalar of its column's type (None: no value)."""


class TableRow(typing_extensions.TypedDict, total=False):
    cells: list[TableCell]
    object: KubeObject | None  # PartialObjectMetadata, the object, or none (includeObject)


class Table(typing_extensions.TypedDict, total=False):
    """A ``Table``: column definitions (omitted, ``null``, after a watch's first event) and one
    row per object."""

    apiVersion: str
    kind: str
    metadata: ListMeta
    columnDefinitions: list[TableColumnDefinition] | None
    rows: list[TableRow]


# Reading a record's nested fields without trusting their shape ---------------------------------

_EMPTY: JSONObject = {}  # shared, read only: what an absent or malformed field reads as

_Record = typing.TypeVar("_Record", bound=JSONObject)
"""A typed record (``core.PodSpec``), or a plain map (``dict[str, str]``)."""


def part(value: _Record | None, /) -> _Record:
    """``value`` (a field read from a typed record: ``part(pod.get("spec"))``), or an empty
    record when it is absent or not a map, as a user's bad object may have it: a nested field
    is read one checked step at a time. The empty record is shared: read it only.
    """
    # An exact dict first (what the API's JSON decodes to), then an absent field: both much
    # cheaper than the ABC check, which every watch event would pay a dozen times.
    if type(value) is dict:
        return value
    if value is None or not isinstance(value, collections.abc.Mapping):
        return typing.cast(_Record, _EMPTY)
    return value


def parts(value: list[_Record] | None, /) -> list[_Record]:
    """The maps of the list ``value`` (a field read from a typed record), leaving out what is
    not one; an empty list when ``value`` is absent or not a list."""
    if not isinstance(value, list):
        return []
    return [
        item
        for item in value
        if type(item) is dict or isinstance(item, collections.abc.Mapping)  # dict: the fast case
    ]
