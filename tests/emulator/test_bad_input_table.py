"""The bad-input table (``tests/api/bad_inputs.py``) sent to the emulator with the real kubectl.

The emulator stands in for the API server in ``berth up``, the demo and most tests, so it must
refuse at the door what the real one refuses (``tests/realcluster/test_bad_input_table.py``).
We test these aspects:

- every bad Queue, PodGroup and Reservation of the table is refused at create, the refusal
  naming the field and (for a CEL rule) saying the rule's message, and nothing is stored;
- a valid object of each kind is created, so the refusals are the bad parts' doing.
"""

from __future__ import annotations

import collections.abc
import json

import pytest

from berth.api import crds
from berth.emulator import testing
from tests.api import bad_inputs, conftest
from tests.api.bad_inputs import Bad

NAMESPACE = "bad-input"


@pytest.fixture(scope="module")
def emulator(
    tmp_path_factory: pytest.TempPathFactory,
) -> collections.abc.Iterator[testing.RunningEmulator]:
    running = testing.start_emulator(tmp_path_factory.mktemp("bad-input"))
    try:
        for crd in crds.render_all().values():
            running.kubectl("create", "-f", "-", input=json.dumps(crd))
        running.kubectl("create", "namespace", NAMESPACE)
        yield running
    finally:
        running.threaded.stop()


def _create(emulator: testing.RunningEmulator, document: bad_inputs.Doc) -> str:
    # JSON, not YAML: a quantity such as "1e30" stays a string, as a user's quoted YAML would.
    made = emulator.kubectl(
        "create", "-f", "-", input=json.dumps(document), check=False, timeout=60.0
    )
    return made.stderr if made.returncode != 0 else ""


@pytest.mark.parametrize("kind", sorted(conftest.BASES))
def test_a_valid_object_of_each_kind_is_created(
    emulator: testing.RunningEmulator, kind: str
) -> None:
    document = bad_inputs.Bad("valid", kind, {}, "", "").document(
        name=f"valid-{kind.lower()}", namespace=NAMESPACE
    )
    assert _create(emulator, document) == ""


@pytest.mark.parametrize("bad", bad_inputs.TABLE, ids=bad_inputs.IDS)
def test_the_emulator_refuses_it_at_create(emulator: testing.RunningEmulator, bad: Bad) -> None:
    name = f"bad-{bad_inputs.IDS.index(bad.id)}"
    answer = _create(emulator, bad.document(name=name, namespace=NAMESPACE))
    assert bad_inputs.refusal_problems(bad, answer) == [], answer
    plural = {"Queue": "queues", "PodGroup": "podgroups", "Reservation": "reservations"}[bad.kind]
    found = emulator.kubectl("get", f"{plural}.scheduling.berth.io", name, "-n", NAMESPACE,
                             check=False)  # fmt: skip
    assert found.returncode != 0  # nothing stored
