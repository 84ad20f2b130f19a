"""Log set-up (``berth.util.logging``), as ``berth run`` and ``/debug/flags/v`` use it.

We test these aspects:

- levels parse from names (any case) and klog verbosity numbers; anything else is refused;
- configuring twice replaces Berth's handler instead of doubling every line;
- aiohttp's per-request access lines appear only when debugging.
"""

from __future__ import annotations

import collections.abc
import io
import logging

import pytest

from berth.util import logging as berth_logging


@pytest.fixture(autouse=True)
def restore_logging() -> collections.abc.Iterator[None]:
    root = logging.getLogger()
    access = logging.getLogger("aiohttp.access")
    handlers, level, access_level = list(root.handlers), root.level, access.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    access.setLevel(access_level)


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("debug", logging.DEBUG),
        ("INFO", logging.INFO),
        ("Warning", logging.WARNING),
        ("warn", logging.WARNING),
        ("error", logging.ERROR),
        ("critical", logging.CRITICAL),
        ("0", logging.INFO),
        ("3", logging.INFO),
        ("4", logging.DEBUG),
        ("10", logging.DEBUG),
        (2, logging.INFO),
    ],
    ids=["debug", "upper", "mixed", "warn", "error", "critical", "v0", "v3", "v4", "v10", "int"],
)
def test_levels_parse_from_names_and_verbosity(text: str | int, level: int) -> None:
    assert berth_logging.parse_level(text) == level


@pytest.mark.parametrize("text", ["chatty", "", "-1", -2], ids=["word", "empty", "neg-str", "neg"])
def test_unknown_levels_are_refused(text: str | int) -> None:
    with pytest.raises(berth_logging.LevelError):
        berth_logging.parse_level(text)


def test_configuring_twice_keeps_one_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    berth_logging.configure("info", stream=first)
    berth_logging.configure("info", stream=second)
    logging.getLogger("berth.test").info("hello")
    assert first.getvalue() == ""
    assert second.getvalue().rstrip().endswith("INFO    berth.test: hello")


@pytest.mark.parametrize(
    ("level", "shown"),
    [("debug", True), ("info", False)],
    ids=["debugging", "normal"],
)
def test_access_lines_appear_only_when_debugging(level: str, shown: bool) -> None:
    stream = io.StringIO()
    berth_logging.configure(level, stream=stream)
    logging.getLogger("aiohttp.access").info("GET /healthz 200")
    assert ("GET /healthz" in stream.getvalue()) is shown
