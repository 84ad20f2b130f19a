"""Berth's side of the bad-input table (``tests/api/bad_inputs.py``).

The API server refuses every object of the table at create (the emulator and the real control
plane are walked by ``tests/emulator`` and ``tests/realcluster``); here, what Berth itself says
of the same objects. We test these aspects:

- the models (what ``berth sim``, the demo and the kubectl plugins load) refuse every one,
  naming the same field, and for a rule the CRDs state in CEL with the same message;
- where Berth's scheduler or controllers would mark the object Invalid (it got past an API
  server without the CRDs' rules), their reason names the same field and, for a CEL rule, says
  the same message: one refusal, worded once;
- every case is one document kubectl can send (the other tiers do).
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from berth.api import errors, manifests
from berth.scheduler.snapshot import podgroups, queues, reservations
from tests.api import bad_inputs
from tests.api.bad_inputs import Bad

# Where pydantic words a bound the CRD states as a rule in its own terms (the API server sends
# both the schema's and the rule's cause for these).
MODEL_WORDS = {
    "queue-own-parent": "cannot be its own parent",
    "resv-ttl-out-of-range": bad_inputs.TTL_RANGE,
    # The duration field type says what exactly is wrong with the text.
    "queue-negative-preemption-delay": "must not be negative",
    "queue-preemption-delay-forever": "is malformed",
    "group-preemption-delay-no-unit": "is malformed",
}
_FIELD = re.compile(r"spec[\w.\[\]]*\w")


def _model_problems(bad: Bad) -> list[tuple[str, str]]:
    try:
        manifests.load_documents([bad.document()])
    except errors.ManifestError as exc:
        return list(exc.problems)
    return []


@pytest.mark.parametrize("bad", bad_inputs.TABLE, ids=bad_inputs.IDS)
def test_the_models_refuse_it_naming_the_field(bad: Bad) -> None:
    problems = _model_problems(bad)
    assert problems, "the models accept it"
    at_field = [m for path, m in problems if path == bad.field or bad.field.startswith(path)]
    assert at_field, problems
    if bad.by == "rule":
        words = MODEL_WORDS.get(bad.id, bad.message)
        assert any(words in message for message in at_field), (words, problems)


def _berth_invalid(bad: Bad) -> str | None:
    """Why Berth's scheduler and controllers would hold the object Invalid, if they would."""
    doc = copy.deepcopy(bad.document())
    if bad.kind == "Queue":
        return queues.queue_info(doc).invalid
    if bad.kind == "PodGroup":
        return podgroups.pod_group_info(doc).invalid
    info = reservations.reservation_info(doc)
    return info.invalid or reservations.template_problem(info) or reservations.owners_problem(info)


@pytest.mark.parametrize("bad", bad_inputs.TABLE, ids=bad_inputs.IDS)
def test_berths_invalid_reason_is_the_api_servers(bad: Bad) -> None:
    reason = _berth_invalid(bad)
    if reason is None:
        return  # parsed leniently at runtime; the API server and the models refuse it
    if bad.rule_message is not None:
        assert bad.field in reason and bad.rule_message in reason, reason
    else:  # in its own words, at the field or the object holding it
        named = _FIELD.findall(reason)
        assert any(bad.field.startswith(field) for field in named), reason


def test_berth_holds_invalid_what_the_rules_on_quantities_and_templates_refuse() -> None:
    held = {bad.id for bad in bad_inputs.TABLE if _berth_invalid(bad) is not None}
    for bad in bad_inputs.TABLE:
        if bad.message in (bad_inputs.RANGE, bad_inputs.reservations.REQUESTS_NOTHING):
            assert bad.id in held, bad.id
    assert {"resv-ttl-out-of-range", "group-min-member-zero"} <= held
    ttl = _berth_invalid(next(b for b in bad_inputs.TABLE if b.id == "resv-ttl-out-of-range"))
    assert ttl is not None and bad_inputs.TTL_RANGE in ttl


def test_every_case_is_one_document_kubectl_can_send() -> None:
    for bad in bad_inputs.TABLE:
        text = yaml.safe_dump(bad.document(name="x", namespace="y"))
        assert yaml.safe_load(text)["metadata"]["name"] == "x"
