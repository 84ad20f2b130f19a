"""The bad-input table: every bad Queue, PodGroup and Reservation the tests know, and how it is
refused.

Each :class:`Bad` is a minimal valid object of its kind (:data:`tests.api.conftest.BASES`) with
one thing wrong, the field the refusal must name and the message the API server's refusal
carries. ``by`` says who refuses it first: ``"rule"`` for a CEL rule (``x-kubernetes-validations``:
the message is the rule's, and Berth's models and parsers say the same), ``"schema"`` for the
OpenAPI schema (types, enums, bounds, patterns: the API server words it itself, and runs the
rules only on what the schema admits; Berth's models name the same field in pydantic's words).
``rule`` is the message of a CEL rule that states the same (checked by ``tests/api/
test_cel_rules.py``, which evaluates the rules alone).

Walked by ``tests/api/test_bad_input_table.py`` (Berth's side), ``tests/emulator/
test_bad_input_table.py`` (the emulator) and ``tests/realcluster/test_bad_input_table.py`` (the
real API server), all through :func:`refusal_problems`.
"""

from __future__ import annotations

import dataclasses
import typing

from berth.api import autoscaling, durations, podgroups, pods, reservations, resources, rules
from tests.api import conftest

Doc = dict[str, typing.Any]
RANGE = resources.RANGE_MESSAGE
TEMPLATE = "spec.template.spec"


@dataclasses.dataclass(frozen=True)
class Bad:
    id: str
    kind: str
    patch: Doc  # merged into the kind's base (conftest.merged: lists replace, ... deletes)
    field: str  # the field the refusal names
    message: str  # what the refusal says (the API server's words)
    by: typing.Literal["rule", "schema"] = "rule"
    rule: str = ""  # a CEL rule's message stating the same, when the schema refuses it first

    @property
    def rule_message(self) -> str | None:
        """The message of the CEL rule that refuses this case, if one does."""
        return self.message if self.by == "rule" else (self.rule or None)

    def document(self, *, name: str | None = None, namespace: str | None = None) -> Doc:
        doc = conftest.merged(conftest.BASES[self.kind], self.patch)
        if name is not None:
            if (doc.get("spec") or {}).get("parent") == doc["metadata"]["name"]:
                doc["spec"]["parent"] = name  # its own parent, under its new name
            doc["metadata"]["name"] = name
        if namespace is not None and self.kind != "Queue":
            doc["metadata"]["namespace"] = namespace
        return doc


def _containers(*containers: Doc, **spec: typing.Any) -> Doc:
    return {"spec": {"template": {"spec": {"containers": list(containers), **spec}}}}


def _ask(**requests: str) -> Doc:
    return {"name": "c", "resources": {"requests": requests}}


_ONE = _ask(cpu="1")
_IN_NOTHING = {"matchExpressions": [{"key": "team", "operator": "In"}]}
_EXISTS_WITH = {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]}


def _node_affinity(requirement: Doc) -> Doc:
    required = {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


_AFFINITY_FIELD = (
    f"{TEMPLATE}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0]"
)

TABLE: list[Bad] = [
    # Queues ---------------------------------------------------------------------------------
    Bad("queue-own-parent", "Queue", {"spec": {"parent": "team-a"}}, "spec.parent",
        "a queue cannot be its own parent"),
    Bad("queue-weight-zero", "Queue", {"spec": {"weight": 0}}, "spec.weight",
        "greater than or equal to 1", by="schema", rule="weight must be between 1 and 65535"),
    Bad("queue-weight-too-big", "Queue", {"spec": {"weight": 65536}}, "spec.weight",
        "less than or equal to 65535", by="schema", rule="weight must be between 1 and 65535"),
    Bad("queue-negative-guarantee", "Queue", {"spec": {"guaranteed": {"cpu": "-1"}}},
        "spec.guaranteed", RANGE),
    Bad("queue-negative-limit", "Queue", {"spec": {"limit": {"memory": "-1Ki"}}},
        "spec.limit", RANGE),
    Bad("queue-absurd-guarantee", "Queue", {"spec": {"guaranteed": {"cpu": "10Pi"}}},
        "spec.guaranteed", RANGE),
    Bad("queue-absurd-limit", "Queue", {"spec": {"limit": {"cpu": "99999999999999999999"}}},
        "spec.limit", RANGE),
    Bad("queue-absurd-exponent", "Queue", {"spec": {"limit": {"memory": "1e30"}}},
        "spec.limit", RANGE),
    Bad("queue-limit-below-guarantee", "Queue",
        {"spec": {"guaranteed": {"cpu": "8"}, "limit": {"cpu": "4"}}}, "spec.limit",
        "limit must be at least guaranteed for every resource both name"),
    Bad("queue-limit-below-guarantee-mixed-units", "Queue",
        {"spec": {"guaranteed": {"cpu": "1", "memory": "1Gi"}, "limit": {"memory": "1000Mi"}}},
        "spec.limit", "limit must be at least guaranteed for every resource both name"),
    Bad("queue-limit-below-guarantee-int", "Queue",
        {"spec": {"guaranteed": {"cpu": 8}, "limit": {"cpu": "7500m"}}}, "spec.limit",
        "limit must be at least guaranteed for every resource both name"),
    Bad("queue-selector-in-without-values", "Queue",
        {"spec": {"namespaceSelector": _IN_NOTHING}},
        "spec.namespaceSelector.matchExpressions[0]", reservations.VALUES_REQUIRED),
    Bad("queue-selector-exists-with-values", "Queue",
        {"spec": {"namespaceSelector": _EXISTS_WITH}},
        "spec.namespaceSelector.matchExpressions[0]", reservations.VALUES_FORBIDDEN),
    Bad("queue-malformed-quantity", "Queue", {"spec": {"guaranteed": {"cpu": "lots"}}},
        "spec.guaranteed.cpu", "should match", by="schema"),
    Bad("queue-unknown-state", "Queue", {"spec": {"state": "Half"}}, "spec.state",
        "Unsupported value", by="schema"),
    Bad("queue-unknown-job-order", "Queue", {"spec": {"jobOrder": "Random"}}, "spec.jobOrder",
        "Unsupported value", by="schema"),
    Bad("queue-max-execution-time-zero", "Queue", {"spec": {"maximumExecutionTimeSeconds": 0}},
        "spec.maximumExecutionTimeSeconds", "greater than or equal to 1", by="schema"),
    Bad("queue-max-execution-time-negative", "Queue",
        {"spec": {"maximumExecutionTimeSeconds": -1}}, "spec.maximumExecutionTimeSeconds",
        "greater than or equal to 1", by="schema"),
    Bad("queue-negative-min-runtime", "Queue", {"spec": {"reclaimMinRuntimeSeconds": -1}},
        "spec.reclaimMinRuntimeSeconds", "greater than or equal to 0", by="schema"),
    Bad("queue-weight-a-string", "Queue", {"spec": {"weight": "heavy"}}, "spec.weight",
        "must be of type integer", by="schema"),
    Bad("queue-negative-preemption-delay", "Queue", {"spec": {"preemptionDelay": "-5s"}},
        "spec.preemptionDelay", "should match", by="schema",
        rule=f"preemptionDelay {rules.DURATION_FORM}"),
    Bad("queue-preemption-delay-forever", "Queue", {"spec": {"preemptionDelay": "forever"}},
        "spec.preemptionDelay", "should match", by="schema",
        rule=f"preemptionDelay {rules.DURATION_FORM}"),
    Bad("queue-provisioning-class-not-a-name", "Queue",
        {"spec": {"autoscaling": {"provisioningRequest": {"provisioningClassName": "Atomic!"}}}},
        "spec.autoscaling.provisioningRequest.provisioningClassName",
        autoscaling.CLASS_NAME_MESSAGE),
    # PodGroups ------------------------------------------------------------------------------
    Bad("group-min-member-zero", "PodGroup", {"spec": {"minMember": 0}}, "spec.minMember",
        "greater than or equal to 1", by="schema", rule=podgroups.MIN_MEMBER),
    Bad("group-min-member-negative", "PodGroup", {"spec": {"minMember": -1}}, "spec.minMember",
        "greater than or equal to 1", by="schema", rule=podgroups.MIN_MEMBER),
    Bad("group-negative-min-resources", "PodGroup",
        {"spec": {"minResources": {"cpu": "-100m"}}}, "spec.minResources", RANGE),
    Bad("group-absurd-min-resources", "PodGroup",
        {"spec": {"minResources": {"nvidia.com/gpu": "1e19"}}}, "spec.minResources", RANGE),
    Bad("group-topology-required-and-preferred", "PodGroup",
        {"spec": {"topology": {"required": "rack", "preferred": "zone"}}}, "spec.topology",
        "set at most one of required and preferred"),
    Bad("group-sub-group-names-twice", "PodGroup",
        {"spec": {"subGroups": [
            {"name": "workers", "selector": {"matchLabels": {"role": "a"}}},
            {"name": "workers", "selector": {"matchLabels": {"role": "b"}}},
        ]}}, "spec.subGroups", "subGroups names must be unique"),
    Bad("group-sub-group-selector-in-without-values", "PodGroup",
        {"spec": {"subGroups": [{"name": "workers", "selector": _IN_NOTHING}]}},
        "spec.subGroups[0].selector.matchExpressions[0]", reservations.VALUES_REQUIRED),
    Bad("group-sub-group-min-member-zero", "PodGroup",
        {"spec": {"subGroups": [
            {"name": "w", "minMember": 0, "selector": {"matchLabels": {"a": "b"}}}
        ]}}, "spec.subGroups[0].minMember", "greater than or equal to 1", by="schema"),
    Bad("group-sub-group-without-selector", "PodGroup", {"spec": {"subGroups": [{"name": "w"}]}},
        "spec.subGroups[0].selector", "Required value", by="schema"),
    Bad("group-schedule-timeout-zero", "PodGroup", {"spec": {"scheduleTimeoutSeconds": 0}},
        "spec.scheduleTimeoutSeconds", "greater than or equal to 1", by="schema"),
    Bad("group-max-execution-time-zero", "PodGroup",
        {"spec": {"maximumExecutionTimeSeconds": 0}}, "spec.maximumExecutionTimeSeconds",
        "greater than or equal to 1", by="schema"),
    Bad("group-max-execution-time-negative", "PodGroup",
        {"spec": {"maximumExecutionTimeSeconds": -60}}, "spec.maximumExecutionTimeSeconds",
        "greater than or equal to 1", by="schema"),
    Bad("group-unknown-on-max-execution-time", "PodGroup",
        {"spec": {"onMaximumExecutionTime": "Explode"}}, "spec.onMaximumExecutionTime",
        "Unsupported value", by="schema"),
    Bad("group-unknown-on-timeout", "PodGroup", {"spec": {"onScheduleTimeout": "Explode"}},
        "spec.onScheduleTimeout", "Unsupported value", by="schema"),
    Bad("group-preemption-delay-no-unit", "PodGroup", {"spec": {"preemptionDelay": "120"}},
        "spec.preemptionDelay", "should match", by="schema",
        rule=f"preemptionDelay {rules.DURATION_FORM}"),
    Bad("group-negative-preemption-delay", "PodGroup", {"spec": {"preemptionDelay": "-5s"}},
        "spec.preemptionDelay", "should match", by="schema",
        rule=f"preemptionDelay {rules.DURATION_FORM}"),
    Bad("group-preemption-delay-forever", "PodGroup", {"spec": {"preemptionDelay": "forever"}},
        "spec.preemptionDelay", "should match", by="schema",
        rule=f"preemptionDelay {rules.DURATION_FORM}"),
    # Reservations ---------------------------------------------------------------------------
    Bad("resv-ttl-and-expires", "Reservation",
        {"spec": {"ttl": "1h", "expires": "2026-01-02T00:00:00Z"}}, "spec.expires",
        "set ttl or expires, not both"),
    Bad("resv-empty-owners", "Reservation", {"spec": {"owners": []}}, "spec.owners",
        "should have at least 1 items", by="schema", rule=reservations.NO_OWNER),
    Bad("resv-owner-no-way", "Reservation", {"spec": {"owners": [{}]}}, "spec.owners[0]",
        "an owner sets exactly one of object, controller or labelSelector"),
    Bad("resv-owner-two-ways", "Reservation",
        {"spec": {"owners": [{"object": {"name": "p"}, "labelSelector": {"matchLabels": {}}}]}},
        "spec.owners[0]", "an owner sets exactly one of object, controller or labelSelector"),
    Bad("resv-owner-selector-in-without-values", "Reservation",
        {"spec": {"owners": [{"labelSelector": _IN_NOTHING}]}},
        "spec.owners[0].labelSelector.matchExpressions[0]", reservations.VALUES_REQUIRED),
    Bad("resv-template-negative-cpu", "Reservation", _containers(_ask(cpu="-1")),
        f"{TEMPLATE}.containers[0].resources.requests", RANGE),
    Bad("resv-template-negative-limit", "Reservation",
        _containers({"name": "c", "resources": {"requests": {"cpu": "1"},
                                                "limits": {"memory": "-1Gi"}}}),
        f"{TEMPLATE}.containers[0].resources.limits", RANGE),
    Bad("resv-template-absurd-cpu", "Reservation", _containers(_ask(cpu="10Pi")),
        f"{TEMPLATE}.containers[0].resources.requests", RANGE),
    Bad("resv-template-absurd-memory", "Reservation", _containers(_ONE, _ask(memory="1e30")),
        f"{TEMPLATE}.containers[1].resources.requests", RANGE),
    Bad("resv-template-negative-init", "Reservation",
        _containers(_ONE, initContainers=[{"name": "i", "resources": {"requests": {"cpu": "-2"}}}]),
        f"{TEMPLATE}.initContainers[0].resources.requests", RANGE),
    Bad("resv-template-negative-overhead", "Reservation",
        _containers(_ONE, overhead={"cpu": "-1"}), f"{TEMPLATE}.overhead", RANGE),
    Bad("resv-template-negative-pod-level", "Reservation",
        _containers(_ONE, resources={"requests": {"cpu": "-1"}}),
        f"{TEMPLATE}.resources.requests", RANGE),
    Bad("resv-template-requests-zero", "Reservation", _containers(_ask(cpu="0")),
        "spec.template", reservations.REQUESTS_NOTHING),
    Bad("resv-template-requests-nothing", "Reservation", _containers({"name": "c"}),
        "spec.template", reservations.REQUESTS_NOTHING),
    Bad("resv-template-toleration-exists-with-value", "Reservation",
        _containers(_ONE, tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
        f"{TEMPLATE}.tolerations[0]", pods.EXISTS_HAS_NO_VALUE),
    Bad("resv-template-toleration-no-key", "Reservation",
        _containers(_ONE, tolerations=[{"value": "v"}]),
        f"{TEMPLATE}.tolerations[0]", pods.EMPTY_KEY_EXISTS),
    Bad("resv-template-node-in-without-values", "Reservation",
        _containers(_ONE, affinity=_node_affinity({"key": "zone", "operator": "In"})),
        _AFFINITY_FIELD, pods.VALUES_REQUIRED),
    Bad("resv-template-node-exists-with-values", "Reservation",
        _containers(_ONE, affinity=_node_affinity(
            {"key": "zone", "operator": "DoesNotExist", "values": ["a"]})),
        _AFFINITY_FIELD, pods.VALUES_FORBIDDEN),
    Bad("resv-template-node-gt-not-an-integer", "Reservation",
        _containers(_ONE, affinity=_node_affinity(
            {"key": "cores", "operator": "Gt", "values": ["many"]})),
        _AFFINITY_FIELD, pods.ONE_INTEGER),
    Bad("resv-template-no-containers", "Reservation", _containers(), f"{TEMPLATE}.containers",
        "should have at least 1 items", by="schema"),
    Bad("resv-template-malformed-quantity", "Reservation", _containers(_ask(cpu="two")),
        f"{TEMPLATE}.containers[0].resources.requests.cpu", "should match", by="schema"),
    # The rule cannot evaluate a duration CEL cannot hold: the API server refuses the field
    # with its evaluation error, which carries the rule's message (the emulator's the rule).
    Bad("resv-ttl-out-of-range", "Reservation", {"spec": {"ttl": "99999999999h"}}, "spec.ttl",
        ""),
    Bad("resv-ttl-negative", "Reservation", {"spec": {"ttl": "-1h"}}, "spec.ttl",
        "should match", by="schema"),
    Bad("resv-ttl-malformed", "Reservation", {"spec": {"ttl": "1.5.5h"}}, "spec.ttl",
        "should match", by="schema"),
    Bad("resv-expires-malformed", "Reservation", {"spec": {"expires": "tomorrow"}},
        "spec.expires", "must be of type date-time", by="schema"),
    Bad("resv-start-at-malformed", "Reservation", {"spec": {"startAt": "tonight"}},
        "spec.startAt", "must be of type date-time", by="schema"),
    Bad("resv-start-at-after-expiry", "Reservation",
        {"spec": {"startAt": "2099-01-02T01:00:00Z", "expires": "2099-01-02T00:00:00Z"}},
        "spec.startAt", reservations.STARTS_AFTER_EXPIRY),
    Bad("resv-start-at-expiry", "Reservation",
        {"spec": {"startAt": "2099-01-02T00:00:00+01:00", "expires": "2099-01-01T23:00:00Z"}},
        "spec.startAt", reservations.STARTS_AFTER_EXPIRY),
    Bad("resv-too-many-owners", "Reservation",
        {"spec": {"owners": [{"object": {"name": f"p{i}"}} for i in range(65)]}},
        "spec.owners", "must have at most 64 items", by="schema"),
]  # fmt: skip
"""Every bad Queue, PodGroup and Reservation the tests know."""

IDS = [bad.id for bad in TABLE]
TTL_RANGE = durations.RANGE_MESSAGE


def refusal_problems(bad: Bad, answer: str) -> list[str]:
    """What is wrong with ``answer`` (an API server's refusal as kubectl prints it) as the
    refusal of ``bad``: it must name the field, with the message, in one cause."""
    problems = []
    if "is invalid" not in answer and "Invalid value" not in answer:
        problems.append("not refused as invalid")
    causes = [line for line in answer.replace("* ", "\n").splitlines() if f"{bad.field}:" in line]
    if not causes:
        problems.append(f"no cause names {bad.field}")
    elif bad.message and not any(bad.message in cause for cause in causes):
        problems.append(f"no cause of {bad.field} says {bad.message!r}")
    return problems
