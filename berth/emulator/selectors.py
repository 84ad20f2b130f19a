"""Label and field selectors: parsing the query strings and matching objects.

Label selectors follow ``k8s.io/apimachinery/pkg/labels`` (``=``, ``==``, ``!=``, ``in``,
``notin``, ``key``, ``!key``, ``>``, ``<``); field selectors allow ``=``, ``==`` and ``!=`` on the
fields each resource supports (:data:`FIELDS`). A malformed selector raises a 400 ``BadRequest``
:class:`~berth.emulator.errors.StatusError` with the API server's wording. The ``LabelSelector``
object form (``matchLabels``/``matchExpressions``) is matched too, for PodDisruptionBudgets.
"""

from __future__ import annotations

import dataclasses
import re
import typing

from berth.api import objects
from berth.emulator import errors

__all__ = [
    "FIELDS",
    "FieldSelector",
    "LabelSelector",
    "field_value",
    "matches_label_selector_object",
    "parse_field_selector",
    "parse_label_selector",
]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One clause of a label selector."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: typing.Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        try:
            number, bound = int(str(value)), int(self.values[0])
        except ValueError:
            return False
        return number > bound if self.op == ">" else number < bound


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector: all requirements must hold (empty matches everything)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: typing.Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)


def _bad(why: str) -> errors.StatusError:
    return errors.bad_request(f"unable to parse requirement: {why}")


def _check_key(key: str) -> None:
    if not _KEY.match(key) or len(key.split("/")[-1]) > 63:
        raise _bad(
            f'key: Invalid value: "{key}": name part must consist of alphanumeric characters, '
            f"'-', '_' or '.', and must start and end with an alphanumeric character",
        )


def _check_value(value: str) -> None:
    if len(value) > 63 or not _VALUE.match(value):
        raise _bad(
            f'values[0][{value}]: Invalid value: "{value}": a valid label must be an empty string '
            f"or consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
            f"an alphanumeric character",
        )


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse ``labelSelector``; a syntax error is 400 BadRequest."""
    if not text or not text.strip():
        return LabelSelector()
    tokens: list[str] = _TOKEN.findall(text)
    if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", text):
        raise errors.bad_request(f"couldn't parse the selector string {text!r}")
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        if position >= len(tokens):
            raise _bad("found '', expected: identifier")
        position += 1
        return tokens[position - 1]

    requirements: list[Requirement] = []
    while True:
        token = take()
        if token == "!":
            key = take()
            _check_key(key)
            requirements.append(Requirement(key, "!"))
        else:
            key = token
            _check_key(key)
            op = peek()
            if op is None or op == ",":
                requirements.append(Requirement(key, "exists"))
            elif op in ("=", "==", "!=", ">", "<"):
                take()
                following_value = peek()
                value = "" if following_value in (None, ",") else take()
                if op in (">", "<"):
                    if not re.fullmatch(r"-?\d+", value):
                        raise _bad("for 'Gt', 'Lt' operators, the value must be an integer")
                else:
                    _check_value(value)
                requirements.append(Requirement(key, "=" if op == "==" else op, (value,)))
            elif op in ("in", "notin"):
                take()
                if take() != "(":
                    raise _bad(f"found '{tokens[position - 1]}', expected: '('")
                values: list[str] = []
                while True:
                    item = take()
                    if item == ")":
                        break
                    if item == ",":
                        continue
                    _check_value(item)
                    values.append(item)
                requirements.append(Requirement(key, op, tuple(values)))
            else:
                raise _bad(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        following = peek()
        if following is None:
            break
        if take() != ",":
            raise _bad(f"found '{following}', expected: ',' or 'end of string'")
    return LabelSelector(tuple(requirements))


def matches_label_selector_object(
    selector: objects.LabelSelector | None, labels: typing.Mapping[str, str] | None
) -> bool:
    """Match the object form (``matchLabels`` + ``matchExpressions``) used by PDBs and others."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or ():
        op = ops.get(str(expression.get("operator")))
        if op is None:
            return False
        requirement = Requirement(
            str(expression.get("key")), op, tuple(expression.get("values") or ())
        )
        if not requirement.matches(labels):
            return False
    return True


# Fields each resource can be selected by, beyond metadata.name and metadata.namespace.
FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    ("", "nodes"): ("spec.unschedulable",),
    ("", "namespaces"): ("status.phase",),
    ("", "secrets"): ("type",),
    ("", "events"): (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    ("events.k8s.io", "events"): ("regarding.kind", "regarding.name", "reason", "type"),
    ("batch", "jobs"): ("status.successful",),
}


@dataclasses.dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: ``(field, equal?, value)`` clauses that must all hold."""

    clauses: tuple[tuple[str, bool, str], ...] = ()

    def matches(self, obj: objects.KubeObject) -> bool:
        return all((field_value(obj, f) == v) == eq for f, eq, v in self.clauses)


def parse_field_selector(text: str | None, *, key: tuple[str, str]) -> FieldSelector:
    """Parse ``fieldSelector`` for resource ``key``; unknown fields are 400 BadRequest."""
    if not text or not text.strip():
        return FieldSelector()
    allowed = ("metadata.name", "metadata.namespace", *FIELDS.get(key, ()))
    clauses: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*", part)
        if match is None:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = match.groups()
        if field not in allowed:
            plural = key[1] if not key[0] else f"{key[1]}.{key[0]}"
            supported = ", ".join(allowed)
            raise errors.bad_request(
                f"field label not supported: {field} (for {plural}; supported: {supported})"
            )
        clauses.append((field, op != "!=", value))
    return FieldSelector(tuple(clauses))


def field_value(obj: objects.KubeObject, field: str) -> str:
    """The string form of a field for selection: missing is ``""``, booleans are lower-case."""
    value: typing.Any = obj
    for part in field.split("."):
        if not isinstance(value, typing.Mapping):
            return ""
        value = value.get(part)
    if value is None:
        return "false" if field in ("spec.unschedulable", "spec.hostNetwork") else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, typing.Mapping):  # events' "source" is {component, host}
        return str(value.get("component", ""))
    return str(value)
