"""``crds/`` is what the models render, and a model change without regenerating is caught.

We test these aspects:
- the committed ``crds/*.yaml`` equal ``berth crds`` output, byte for byte;
- rendering is deterministic (two renders dump the same text);
- a changed model (a description, a default) makes ``check`` name the file that differs;
- a missing file is reported too.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil

import pydantic
import pytest

from berth.api import crds, queues

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_committed_crds_match_the_models() -> None:
    assert crds.check(ROOT / "crds") == [], "run hack/gen-crds and commit crds/"


def test_rendering_is_deterministic() -> None:
    first = {name: crds.dump(crd) for name, crd in crds.render_all().items()}
    second = {name: crds.dump(crd) for name, crd in crds.render_all().items()}
    assert first == second


class _ChangedSpec(queues.QueueSpec):
    weight: int = pydantic.Field(default=2, ge=1, le=queues.MAX_WEIGHT)
    """A changed description and default."""


class _ChangedQueue(queues.Queue):
    spec: _ChangedSpec = pydantic.Field(default_factory=_ChangedSpec)


@pytest.fixture
def crds_copy(tmp_path: pathlib.Path) -> pathlib.Path:
    target = tmp_path / "crds"
    shutil.copytree(ROOT / "crds", target)
    return target


def test_a_changed_model_makes_check_name_its_file(
    monkeypatch: pytest.MonkeyPatch, crds_copy: pathlib.Path
) -> None:
    assert crds.check(crds_copy) == []
    queue, *others = crds.DEFINITIONS
    assert queue.model is queues.Queue
    monkeypatch.setattr(
        crds, "DEFINITIONS", (dataclasses.replace(queue, model=_ChangedQueue), *others)
    )
    assert crds.check(crds_copy) == [crds_copy / "queues.yaml"]


def test_a_changed_description_makes_check_fail(
    monkeypatch: pytest.MonkeyPatch, crds_copy: pathlib.Path
) -> None:
    original = crds._describe
    monkeypatch.setattr(crds, "_describe", lambda text: original(text) + " (changed)")
    assert crds.check(crds_copy) == [crds_copy / name for name in crds.render_all()]


def test_a_missing_file_is_reported(crds_copy: pathlib.Path) -> None:
    (crds_copy / "podgroups.yaml").unlink()
    assert crds.check(crds_copy) == [crds_copy / "podgroups.yaml"]
