"""``--nodes`` pool specs.

We test these aspects:
- count, resources, labels, taints and prefix are read; defaults fill the rest;
- malformed specs are ``NodeSpecError`` saying what is wrong.
"""

from __future__ import annotations

import pytest

from berth.api import pods
from berth.sim import errors, nodespecs


def test_a_full_spec_is_read() -> None:
    pool = nodespecs.parse(
        "100x cpu=64,memory=512Gi,nvidia.com/gpu=8 label=pool=gpu "
        "taint=dedicated=gpu:NoSchedule taint=spot:PreferNoSchedule prefix=gpu-",
        index=3,
    )
    assert pool.count == 100
    assert pool.name_prefix == "gpu-"
    assert pool.allocatable == {
        "cpu": 64_000,
        "memory": 512 * 1024**3 * 1000,
        "nvidia.com/gpu": 8000,
    }
    assert pool.labels == {"pool": "gpu"}
    assert [(t.key, t.value, t.effect) for t in pool.taints] == [
        ("dedicated", "gpu", pods.TaintEffect.NO_SCHEDULE),
        ("spot", None, pods.TaintEffect.PREFER_NO_SCHEDULE),
    ]


def test_defaults_are_one_node_and_a_numbered_prefix() -> None:
    pool = nodespecs.parse("cpu=4", index=2)
    assert (pool.count, pool.name_prefix) == (1, "pool2-")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("10x", "no resources"),
        ("cpu=abc", "cpu: 'abc' is not a quantity"),
        ("cpu=-1", "must not be negative"),
        ("cpu=1 taint=x:Sometimes", "a taint is"),
        ("cpu=1 label=pool", "a label is"),
        ("cpu=1 fast", "is not <count>x"),
        ("0x cpu=1", "is not <count>x"),
    ],
    ids=[
        "empty",
        "no-resources",
        "bad-quantity",
        "negative",
        "bad-effect",
        "bad-label",
        "stray-word",
        "zero-count",
    ],
)
def test_malformed_specs_are_refused(spec: str, message: str) -> None:
    with pytest.raises(errors.NodeSpecError, match=message):
        nodespecs.parse(spec)
