"""The DRA environment of CEL device selectors (``berth.api.device_cel``).

We test these aspects:

- ``device.driver``, ``device.allowMultipleAllocations``, attributes by domain (an attribute
  written without a domain is the driver's), capacities as quantities with the quantity
  library, semantic versions with the semver library, ``has()``, ``cel.bind``;
- an unknown domain is an empty map: ``has`` says false, reading from it fails at run time;
- a selector that does not compile, one that fails on a device, and one that does not evaluate
  to a bool are :class:`SelectorError`\\ s with a one-line message, never other exceptions;
- semantic versions order by precedence (pre-releases before the release, build ignored).
"""

from __future__ import annotations

import pytest

from berth.api import device_cel

DEVICE = device_cel.device_view(
    driver="gpu.example.com",
    attributes={
        "model": "a100",
        "index": 3,
        "mig": False,
        "driverVersion": device_cel.parse_version("1.2.3"),
        "pcie.example.com/root": "root-a",
    },
    capacity={"memory": 80 * 2**30 * 1000, "cores": 108_000},
    allow_multiple_allocations=True,
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ("device.allowMultipleAllocations", True),
        ('device.attributes["gpu.example.com"].model == "a100"', True),
        ('device.attributes["gpu.example.com"].index > 2', True),
        ('device.attributes["gpu.example.com"].mig', False),
        ('device.attributes["pcie.example.com"].root == "root-a"', True),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("80Gi"))', False),
        ('device.capacity["gpu.example.com"].cores.asInteger() == 108', True),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
        ('device.attributes["gpu.example.com"].driverVersion == semver("1.2.3")', True),
        ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
        ('semver("v1.2", true).compareTo(semver("1.2.0")) == 0', True),
        ('isSemver("1.02.3")', False),
        ('has(device.attributes["gpu.example.com"].model)', True),
        ('has(device.attributes["other.example.com"].model)', False),
        (
            'cel.bind(g, device.attributes["gpu.example.com"], g.model == "a100" && g.index == 3)',
            True,
        ),
        ('device.attributes["gpu.example.com"].model.startsWith("a1")', True),
    ],
)
def test_selectors_see_the_device(expression: str, expected: bool) -> None:
    assert device_cel.compile_selector(expression).matches(DEVICE) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ('device.attributes["other.example.com"].model == "x"', "no such key: 'model'"),
        ('device.attributes["gpu.example.com"].index', "evaluated to IntType, not a bool"),
        ('device.attributes["gpu.example.com"].model.major() == 1', "no such overload"),
    ],
)
def test_a_selector_failing_on_a_device_raises_a_selector_error(
    expression: str, message: str
) -> None:
    with pytest.raises(device_cel.SelectorError) as caught:
        device_cel.compile_selector(expression).matches(DEVICE)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "expression",
    ["device.driver ==", "", "cel.bind(1, 2, 3)", "q.sign()"],
)
def test_a_selector_that_does_not_compile_is_a_selector_error(expression: str) -> None:
    with pytest.raises(device_cel.SelectorError) as caught:
        device_cel.compile_selector(expression)
    assert str(caught.value).startswith("compilation failed")
    assert "\n" not in str(caught.value)


def test_versions_order_by_precedence() -> None:
    parse = device_cel.parse_version
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0-beta.11", "1.0.0", "1.1.0"]
    assert sorted(ordered, key=parse) == ordered
    assert parse("1.0.0+build.5") == parse("1.0.0")
    with pytest.raises(ValueError):
        parse("01.2.3")
    assert parse("v1", normalize=True) == parse("1.0.0")
