"""The CEL rules (``x-kubernetes-validations``) of the committed CRDs in ``crds/``.

We test these aspects:
- every rule in ``crds/`` compiles with cel-python and has a case here that it rejects;
- each rule rejects what it should, at the right field path, with its message;
- valid objects (including edge cases such as int quantities and mixed units) pass;
- the models refuse every object the CEL rules refuse (the two agree);
- the Kubernetes quantity library functions behave as the API server's do.
"""

from __future__ import annotations

import pathlib
import re
import typing

import celpy.celtypes
import pytest
import yaml

from berth.api import cel, defaulting, errors, manifests
from tests.api import bad_inputs, conftest

Doc = dict[str, typing.Any]
ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS: dict[str, Doc] = {}
for _path in sorted((ROOT / "crds").glob("*.yaml")):
    _crd = yaml.safe_load(_path.read_text())
    CRDS[_crd["spec"]["names"]["kind"]] = _crd


def violations(kind: str, document: Doc) -> list[cel.Violation]:
    crd = CRDS[kind]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return cel.crd_validator(crd).validate(defaulting.apply_defaults(schema, document))


# (id, kind, patch, path of the violation, fragment of its message): the bad-input table's
# cases a CEL rule refuses (tests/api/bad_inputs.py).
REJECTED: list[tuple[str, str, Doc, str, str]] = [
    (bad.id, bad.kind, bad.patch, bad.field, bad.rule_message)
    for bad in bad_inputs.TABLE
    if bad.rule_message is not None
]

ACCEPTED: list[tuple[str, str, Doc]] = [
    ("queue-base", "Queue", {}),
    ("queue-no-spec", "Queue", {"spec": ...}),
    ("queue-weight-max", "Queue", {"spec": {"weight": 65535}}),
    ("queue-limit-equal", "Queue", {"spec": {"guaranteed": {"cpu": "8"}, "limit": {"cpu": 8}}}),
    (
        "queue-limit-other-resource",
        "Queue",
        {"spec": {"guaranteed": {"cpu": "8", "memory": "1Gi"}, "limit": {"cpu": "9"}}},
    ),
    (
        "queue-limit-units",
        "Queue",
        {"spec": {"guaranteed": {"memory": "1G"}, "limit": {"memory": "1Gi"}}},
    ),
    ("queue-zero-guarantee", "Queue", {"spec": {"guaranteed": {"cpu": "0"}}}),
    (
        "queue-generated-name",
        "Queue",
        {"metadata": {"name": ..., "generateName": "team-a"}, "spec": {"parent": "team-a"}},
    ),
    ("group-base", "PodGroup", {}),
    (
        "queue-atomic-scale-up",
        "Queue",
        {
            "spec": {
                "autoscaling": {
                    "provisioningRequest": {
                        "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                        "parameters": {"ValidUntilSeconds": "600"},
                    },
                    "reservationBuffers": True,
                }
            }
        },
    ),
    ("group-defaulted", "PodGroup", {"spec": ...}),
    (
        "group-roles-and-topology",
        "PodGroup",
        {
            "spec": {
                "topology": {"preferred": "zone"},
                "subGroups": [
                    {"name": "launcher", "selector": {"matchLabels": {"role": "launcher"}}},
                    {
                        "name": "workers",
                        "minMember": 8,
                        "selector": {"matchLabels": {"role": "worker"}},
                        "topology": {"required": "rack"},
                    },
                ],
            }
        },
    ),
    ("resv-base", "Reservation", {}),
    ("resv-ttl-only", "Reservation", {"spec": {"ttl": "0"}}),
    ("resv-expires-only", "Reservation", {"spec": {"expires": "2026-01-02T00:00:00Z"}}),
    (
        "resv-three-owners",
        "Reservation",
        {
            "spec": {
                "owners": [
                    {"object": {"name": "p"}},
                    {"controller": {"kind": "Job", "name": "j"}},
                    {"labelSelector": {"matchLabels": {"app": "x"}}},
                ]
            }
        },
    ),
]


def _rules_in_crds() -> list[str]:
    return [r["rule"] for crd in CRDS.values() for r in cel.crd_validator(crd).rules]


def test_the_crds_have_rules_on_every_kind() -> None:
    assert set(CRDS) == {"Queue", "PodGroup", "Reservation"}
    for crd in CRDS.values():
        assert cel.crd_validator(crd).rules, crd["metadata"]["name"]


def test_every_rule_in_the_crds_has_a_case_it_rejects(bases: dict[str, Doc]) -> None:
    broken = {
        v.rule
        for _, kind, patch, _, _ in REJECTED
        for v in violations(kind, conftest.merged(bases[kind], patch))
    }
    assert [rule for rule in _rules_in_crds() if rule not in broken] == []


@pytest.mark.parametrize(
    ("kind", "patch", "path", "fragment"),
    [case[1:] for case in REJECTED],
    ids=[case[0] for case in REJECTED],
)
def test_rule_rejects(
    bases: dict[str, Doc], kind: str, patch: Doc, path: str, fragment: str
) -> None:
    found = violations(kind, conftest.merged(bases[kind], patch))
    assert [v for v in found if v.path == path and fragment in v.message], found


@pytest.mark.parametrize(
    ("kind", "patch"),
    [case[1:3] for case in REJECTED],
    ids=[case[0] for case in REJECTED],
)
def test_the_model_refuses_what_the_rule_rejects(
    bases: dict[str, Doc], kind: str, patch: Doc
) -> None:
    with pytest.raises(errors.ManifestError):
        manifests.load_documents([conftest.merged(bases[kind], patch)])


@pytest.mark.parametrize(
    ("kind", "patch"), [case[1:] for case in ACCEPTED], ids=[case[0] for case in ACCEPTED]
)
def test_valid_objects_pass_every_rule_and_the_model(
    bases: dict[str, Doc], kind: str, patch: Doc
) -> None:
    document = conftest.merged(bases[kind], patch)
    assert violations(kind, document) == []
    manifests.load_documents([document])


# The quantity library ---------------------------------------------------------------------


def _evaluate(expression: str, **variables: typing.Any) -> typing.Any:
    validator = cel.Validator(
        {"type": "object", "x-kubernetes-validations": [{"rule": expression, "message": "m"}]}
    )
    return validator.validate(variables)


@pytest.mark.parametrize(
    "expression",
    [
        "quantity('1Gi').compareTo(quantity('1024Mi')) == 0",
        "quantity('1G').compareTo(quantity('1Gi')) == -1",
        "quantity('2').compareTo(quantity('1500m')) == 1",
        "quantity('1.5').isGreaterThan(quantity('1'))",
        "quantity('100m').isLessThan(quantity('1'))",
        "sign(quantity('-1')) == -1 && sign(quantity('0')) == 0 && sign(quantity('1n')) == 1",
        "isQuantity('4Ki') && !isQuantity('4 parsecs')",
        "quantity('1k').isInteger() && !quantity('1500m').isInteger()",
        "quantity('2k').asInteger() == 2000",
        "quantity(string(self.n)).compareTo(quantity('8')) == 0",
    ],
)
def test_quantity_library(expression: str) -> None:
    assert _evaluate(expression, n=8) == []


def test_a_false_rule_is_a_violation_naming_its_message() -> None:
    (violation,) = _evaluate("quantity('1').isGreaterThan(quantity('2'))")
    assert violation.message == "m"
    assert str(violation) == "<root>: m"


def test_an_unparseable_quantity_is_a_violation_not_a_crash() -> None:
    (violation,) = _evaluate("sign(quantity('bogus')) >= 0")
    assert "error" in violation.message


def test_a_rule_that_does_not_compile_is_refused() -> None:
    with pytest.raises(cel.RuleError, match="does not compile"):
        cel.Validator(
            {"type": "object", "x-kubernetes-validations": [{"rule": "self.(", "message": "m"}]}
        )


def test_transition_rules_are_refused() -> None:
    with pytest.raises(cel.RuleError, match="oldSelf"):
        cel.Validator(
            {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "m"}],
            }
        )


def test_library_functions_return_cel_types() -> None:
    assert isinstance(cel.FUNCTIONS["sign"](cel.CelQuantity(-5)), celpy.celtypes.IntType)


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("quantity('1').sign() >= 0", "write sign(...), a global function"),
        ("isLessThan(quantity('1'), quantity('2'))", "write q.isLessThan(...), a member function"),
    ],
)
def test_quantity_functions_in_the_form_kubernetes_declares_them(
    expression: str, problem: str
) -> None:
    # The real API server refuses a CRD whose rule calls `q.sign()` (found on Kubernetes 1.36),
    # although cel-python would evaluate it.
    with pytest.raises(cel.RuleError, match=re.escape(problem)):
        _evaluate(expression)


def test_a_quoted_function_name_is_not_a_call() -> None:
    assert _evaluate("'x.sign()' != '' && quantity('1').isLessThan(quantity('2'))") == []
