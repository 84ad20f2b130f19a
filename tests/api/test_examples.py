"""Every example manifest round-trips through its model.

We test these aspects:
- each document under ``examples/`` loads into the model its apiVersion/kind names;
- dumping it gives back the input camelCase JSON, with the defaults the CRD declares filled in
  (the CRD's defaulting and the model's defaults agree);
- every numbered example folder has a README and at least one manifest;
- the example objects break none of the CRDs' CEL rules.
"""

from __future__ import annotations

import pathlib
import typing

import pytest
import yaml

from berth.api import cel, crds, defaulting, manifests

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The numbered folders are the user-facing examples (others, e.g. sim/, hold other inputs).
FOLDERS = sorted(p for p in EXAMPLES.glob("[0-9][0-9]-*") if p.is_dir())
FILES = sorted(f for folder in FOLDERS for f in folder.glob("*.yaml"))
CRDS = {d.kind: crds.render(d) for d in crds.DEFINITIONS}


def _documents() -> list[tuple[str, dict[str, typing.Any]]]:
    out = []
    for path in FILES:
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc is not None:
                out.append((f"{path.relative_to(EXAMPLES)}#{index}", doc))
    return out


DOCUMENTS = _documents()


def _schema(kind: str) -> dict[str, typing.Any]:
    crd = CRDS[kind]
    schema: dict[str, typing.Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_there_are_examples_of_every_kind() -> None:
    kinds = {doc["kind"] for _, doc in DOCUMENTS}
    assert kinds == {"Queue", "PodGroup", "Reservation", "Pod"}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_example_folder_has_a_readme_and_manifests(folder: pathlib.Path) -> None:
    assert (folder / "README.md").is_file()
    assert list(folder.glob("*.yaml"))


@pytest.mark.parametrize(("where", "document"), DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_example_round_trips_with_crd_defaults(where: str, document: dict[str, typing.Any]) -> None:
    (model,) = manifests.load_documents([document], source=where)
    expected = document
    if document["kind"] in CRDS:
        expected = defaulting.apply_defaults(_schema(document["kind"]), document)
    assert model.to_api() == expected


@pytest.mark.parametrize(
    ("where", "document"),
    [(w, d) for w, d in DOCUMENTS if d["kind"] in CRDS],
    ids=[w for w, d in DOCUMENTS if d["kind"] in CRDS],
)
def test_example_passes_the_crd_cel_rules(where: str, document: dict[str, typing.Any]) -> None:
    schema = _schema(document["kind"])
    assert cel.Validator(schema).validate(defaulting.apply_defaults(schema, document)) == []


def test_defaults_show_up_in_the_round_trip() -> None:
    # The gang's PodGroup names no priorityClassName etc.: nothing but declared defaults appear.
    where, group = next((w, d) for w, d in DOCUMENTS if d["kind"] == "PodGroup")
    (model,) = manifests.load_documents([group], source=where)
    assert model.to_api()["spec"] == {
        "minMember": 4,
        "queue": "team-a",
        "onScheduleTimeout": "Requeue",
    }
    where, queue = next((w, d) for w, d in DOCUMENTS if d["kind"] == "Queue")
    (model,) = manifests.load_documents([queue], source=where)
    spec = model.to_api()["spec"]
    assert {k: spec[k] for k in ("weight", "priority", "reclaimable", "state")} == {
        "weight": 1,
        "priority": 0,
        "reclaimable": True,
        "state": "Open",
    }
