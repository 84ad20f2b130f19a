"""Fixtures and options shared by every test folder.

- ``--with-e2e`` runs the tests marked ``e2e`` (they need a real cluster); otherwise they skip.
- ``virtual_clock`` is a fresh :class:`berth.util.clocks.VirtualClock` at a fixed epoch.
- synchronous tests are hidden from looptime's event loop lookup (it would leak a loop).
"""

from __future__ import annotations

import inspect

import pytest
import pytest_asyncio

from berth.util import clocks

pytest_plugins = [
    "berth.emulator.testing",  # emulator, module_emulator, kubectl fixtures
    "tests.realcluster.fixtures",  # real_cluster, real
]

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


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> object:
    # looptime asks the session's event loop policy for "the" loop in every test; in a
    # synchronous test that creates a loop nobody closes, and its ResourceWarning fails whichever
    # later test the garbage collector happens to run in (filterwarnings = error). Synchronous
    # tests that do not ask for the policy themselves are hidden from it.
    if (
        not pytest_asyncio.is_async_test(pyfuncitem)
        and "event_loop_policy" not in inspect.signature(pyfuncitem.obj).parameters
    ):
        pyfuncitem.funcargs.pop("event_loop_policy", None)
    return (yield)
