"""Shared API parts: timestamps, ObjectMeta, Condition, the model base and defaulting.

We test these aspects:
- timestamps parse RFC 3339 with an offset, normalise to UTC and write a trailing Z;
- naive or malformed timestamps are refused;
- ObjectMeta keeps keys Berth does not declare; specs refuse them;
- structural defaulting fills declared defaults, descends into defaulted objects, treats null
  as absent, and never changes its input.
"""

from __future__ import annotations

import datetime

import pydantic
import pytest

from berth.api import defaulting, keys, meta


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
        ("2026-01-01T01:30:00+01:30", "2026-01-01T00:00:00Z"),
        ("2026-01-01T00:00:00.250Z", "2026-01-01T00:00:00.25Z"),
        ("2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00Z"),
    ],
    ids=["utc", "offset", "fraction", "zero-offset"],
)
def test_timestamps_are_written_in_utc_with_z(text: str, written: str) -> None:
    assert meta.format_timestamp(meta.parse_timestamp(text)) == written


@pytest.mark.parametrize(
    "text",
    ["2026-01-01T00:00:00", "yesterday", "", "2026-13-01T00:00:00Z"],
    ids=["naive", "word", "empty", "month-13"],
)
def test_bad_timestamps_are_refused(text: str) -> None:
    with pytest.raises(ValueError) as info:
        meta.parse_timestamp(text)
    assert repr(text) in str(info.value)


def test_a_naive_datetime_is_refused_by_the_field() -> None:
    with pytest.raises(pydantic.ValidationError, match="timezone-aware"):
        meta.Condition(
            type="X",
            status=meta.ConditionStatus.TRUE,
            last_transition_time=datetime.datetime(2026, 1, 1),
        )


def test_object_meta_keeps_unknown_keys() -> None:
    raw = {"name": "x", "managedFields": [{"manager": "kubectl"}], "selfLink": "/x"}
    assert meta.ObjectMeta.model_validate(raw).to_api() == raw


def test_object_meta_full_round_trip() -> None:
    raw = {
        "name": "x",
        "namespace": "ml",
        "labels": {keys.POD_GROUP_LABEL: "g"},
        "annotations": {keys.SIM_DURATION_ANNOTATION: "30s"},
        "uid": "u",
        "resourceVersion": "7",
        "generation": 2,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "deletionTimestamp": "2026-01-01T00:01:00Z",
        "finalizers": ["scheduling.berth.io/reservation"],
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u2", "controller": True}
        ],
    }
    parsed = meta.ObjectMeta.model_validate(raw)
    assert parsed.owner_references is not None and parsed.owner_references[0].controller is True
    assert parsed.creation_timestamp == datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert parsed.to_api() == raw


def test_api_models_refuse_unknown_keys() -> None:
    with pytest.raises(pydantic.ValidationError, match="Extra inputs"):
        meta.Condition.model_validate({"type": "X", "status": "True", "severity": "high"})


def test_keys_are_spelt_from_the_group() -> None:
    assert f"{keys.GROUP}/{keys.VERSION}" == keys.API_VERSION
    for key in (
        keys.POD_GROUP_LABEL,
        keys.QUEUE_LABEL,
        keys.RESERVATION_LABEL,
        keys.ADMISSION_GATE,
    ):
        assert key.startswith(f"{keys.GROUP}/")


SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "default": {},
            "properties": {
                "weight": {"type": "integer", "default": 1},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"on": {"type": "boolean", "default": True}},
                    },
                },
                "map": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"n": {"type": "integer", "default": 0}},
                    },
                },
                "nullable": {"type": "string", "nullable": True, "default": "d"},
            },
        }
    },
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({}, {"spec": {"nullable": "d", "weight": 1}}),
        ({"spec": None}, {"spec": {"nullable": "d", "weight": 1}}),
        ({"spec": {"weight": 5}}, {"spec": {"nullable": "d", "weight": 5}}),
        (
            {"spec": {"items": [{}, {"on": False}]}},
            {"spec": {"nullable": "d", "weight": 1, "items": [{"on": True}, {"on": False}]}},
        ),
        (
            {"spec": {"map": {"a": {}}}},
            {"spec": {"nullable": "d", "weight": 1, "map": {"a": {"n": 0}}}},
        ),
        ({"spec": {"nullable": None}}, {"spec": {"weight": 1, "nullable": None}}),
    ],
    ids=[
        "defaulted-object",
        "null-is-absent",
        "given-kept",
        "list-items",
        "map-values",
        "nullable-null-kept",
    ],
)
def test_defaulting(value: dict[str, object], expected: dict[str, object]) -> None:
    before = repr(value)
    assert defaulting.apply_defaults(SCHEMA, value) == expected
    assert repr(value) == before
