"""Quantities: every suffix and exponent form, exact arithmetic, rounding, bad input.

We test these aspects:
- each decimal SI, binary SI and exponent form parses to the exact milli-units;
- sub-milli values round up, as Kubernetes' ``MilliValue()`` does;
- canonical formatting keeps the input's format;
- malformed strings are refused with a message naming the bad value.
"""

from __future__ import annotations

import pytest

from berth.api import errors, quantities, resources

GI = 1024**3


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("0", 0),
        ("1", 1000),
        ("1.5", 1500),
        (".5", 500),
        ("5.", 5000),
        ("+2", 2000),
        ("-1", -1000),
        ("100m", 100),
        ("1n", 1),
        ("999n", 1),
        ("1000001n", 2),
        ("1u", 1),
        ("2k", 2_000_000),
        ("1M", 1_000_000_000),
        ("1G", 10**12),
        ("1T", 10**15),
        ("1P", 10**18),
        ("1E", 10**21),
        ("4Ki", 4096 * 1000),
        ("1Mi", 1024**2 * 1000),
        ("1Gi", GI * 1000),
        ("0.5Gi", GI * 500),
        ("1Ti", 1024**4 * 1000),
        ("1Pi", 1024**5 * 1000),
        ("1Ei", 1024**6 * 1000),
        ("1e3", 1_000_000),
        ("1E3", 1_000_000),
        ("1e-3", 1),
        ("1.5e+2", 150_000),
        ("12e-4", 2),
    ],
)
def test_parses_every_form_exactly(text: str, milli: int) -> None:
    assert quantities.parse_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("1500m", "1500m"), ("1.5", "1500m"), ("2000", "2k"), ("1536Mi", "1536Mi"),
     ("1.5Gi", "1536Mi"), ("1e3", "1e3"), ("1024", "1024"), ("0.1m", "1m"), ("0", "0")],
)  # fmt: skip
def test_formats_canonically_in_the_input_format(text: str, canonical: str) -> None:
    assert str(quantities.parse_quantity(text)) == canonical


def test_numbers_are_accepted_like_json() -> None:
    assert quantities.parse_milli(2) == 2000
    assert quantities.parse_milli(0.25) == 250


@pytest.mark.parametrize("bad", ["", " 1", "1 ", "abc", "1.2.3", "5parsecs", "1Kii", "1ki",
                                 "--1", "1e", "Gi", "1e999", "1.5x"])  # fmt: skip
def test_malformed_quantities_are_refused_naming_the_value(bad: str) -> None:
    with pytest.raises(errors.QuantityError) as caught:
        quantities.parse_quantity(bad)
    assert repr(bad) in str(caught.value)


def test_resource_lists_add_subtract_and_fit() -> None:
    a = resources.ResourceList.parse({"cpu": "1", "memory": "1Gi"})
    b = resources.ResourceList.parse({"cpu": "500m", "nvidia.com/gpu": "1"})
    assert (a + b).to_api() == {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert (a - a) == resources.ResourceList()
    assert b.fits(a + b)
    assert not b.fits(a)
    assert b.exceeding(a) == ["nvidia.com/gpu"]
    assert a.maximum(b) == resources.ResourceList.parse(
        {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    )


def test_dominant_share_is_the_largest_share() -> None:
    total = resources.ResourceList.parse({"cpu": "10", "memory": "100Gi"})
    used = resources.ResourceList.parse({"cpu": "1", "memory": "50Gi"})
    assert used.dominant_share(total) == 0.5
