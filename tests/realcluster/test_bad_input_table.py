"""The bad-input table (``tests/api/bad_inputs.py``) sent to the real API server with kubectl.

Berth's CRDs, as the chart installs them, are the API server's to enforce: what Berth would
mark Invalid must never get in. We test these aspects (the issue's "must show" 4):

- the real kube-apiserver accepts the CRDs (every CEL rule compiles within its cost budget);
- every bad Queue, PodGroup and Reservation of the table — negative and absurd quantities in
  every resource list (templates included), selectors and tolerations that contradict their
  operator, templates that request nothing, out-of-range durations — is refused at create,
  naming the field and (for a CEL rule) with the rule's message, Berth's own words (``tests/
  api/test_bad_input_table.py``); nothing is stored;
- a valid object of each kind is created.
"""

from __future__ import annotations

import json

import pytest

from tests.api import bad_inputs, conftest
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster

PLURALS = {"Queue": "queues", "PodGroup": "podgroups", "Reservation": "reservations"}


def _create(real: cluster.RealCluster, document: bad_inputs.Doc) -> str:
    # JSON, not YAML: a quantity such as "1e30" stays a string, as a user's quoted YAML would.
    made = real.kubectl("create", "-f", "-", input=json.dumps(document), check=False)
    return str(made.stderr) if made.returncode != 0 else ""


@pytest.mark.timeout(600)
def test_the_real_api_server_refuses_every_bad_object_at_create(
    real: cluster.RealCluster,
) -> None:
    namespace = real.namespace()
    for kind in sorted(conftest.BASES):
        valid = bad_inputs.Bad("valid", kind, {}, "", "").document(
            name=f"valid-{namespace}-{kind.lower()}", namespace=namespace
        )
        assert _create(real, valid) == "", kind
        if kind == "Queue":
            real.kubectl("delete", "queue", valid["metadata"]["name"])
    wrong: dict[str, tuple[list[str], str]] = {}
    for index, bad in enumerate(bad_inputs.TABLE):
        name = f"bad-{namespace}-{index}"
        answer = _create(real, bad.document(name=name, namespace=namespace))
        problems = bad_inputs.refusal_problems(bad, answer)
        stored = real.kubectl(
            "get", f"{PLURALS[bad.kind]}.scheduling.berth.io", name, "-n", namespace, check=False
        )
        if stored.returncode == 0:
            problems.append("stored")
            if bad.kind == "Queue":
                real.kubectl("delete", "queue", name, check=False)
        if problems:
            wrong[bad.id] = (problems, answer)
    assert wrong == {}
