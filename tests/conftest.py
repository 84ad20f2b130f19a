"""Fixtures and options shared by every test folder.

- ``--with-e2e`` runs the tests marked ``e2e`` (they need a real cluster); otherwise they skip.
- ``virtual_clock`` is a fresh :class:`berth.util.clocks.VirtualClock` at a fixed epoch.
"""

from __future__ import annotations

import pytest

from berth.util import clocks

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a fixed, readable start for virtual time.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--with-e2e", action="store_true", help="run tests that need a cluster")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--with-e2e"):
        return
    skip = pytest.mark.skip(reason="needs a real cluster: pass --with-e2e")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def virtual_clock() -> clocks.VirtualClock:
    return clocks.VirtualClock(EPOCH)
