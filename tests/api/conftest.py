"""Fixtures for the API tests: minimal valid documents of each kind and a deep-merge helper."""

from __future__ import annotations

import copy
import typing

import pytest

Doc = dict[str, typing.Any]

QUEUE: Doc = {
    "apiVersion": "scheduling.berth.io/v1alpha1",
    "kind": "Queue",
    "metadata": {"name": "team-a"},
    "spec": {"parent": "research", "guaranteed": {"cpu": "8"}, "limit": {"cpu": "16"}},
}
POD_GROUP: Doc = {
    "apiVersion": "scheduling.berth.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"minMember": 4, "queue": "team-a"},
}
RESERVATION: Doc = {
    "apiVersion": "scheduling.berth.io/v1alpha1",
    "kind": "Reservation",
    "metadata": {"name": "hold", "namespace": "ml"},
    "spec": {
        "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
        },
        "owners": [{"labelSelector": {"matchLabels": {"app": "train"}}}],
    },
}
BASES: dict[str, Doc] = {"Queue": QUEUE, "PodGroup": POD_GROUP, "Reservation": RESERVATION}


def merged(base: Doc, patch: Doc) -> Doc:
    """``base`` with ``patch`` merged in (mappings recursively; ``...`` deletes a key)."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is ...:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@pytest.fixture
def bases() -> dict[str, Doc]:
    return copy.deepcopy(BASES)
