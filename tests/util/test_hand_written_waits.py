"""Berth waits and wakes with one toolkit, ``berth.util.wakeups`` (issue #31).

We test these aspects:

- no module of ``berth/`` waits by hand — ``asyncio.sleep``, ``asyncio.wait``,
  ``asyncio.wait_for`` or a ``.wait()`` call (an event's, a condition's, a child process's) —
  but the toolkit itself: ``util/wakeups.py``, ``util/aiotasks.py`` and, for the processes a
  command starts, ``util/children.py``;
- the guard finds the waits it looks for (it is not blind).

An ``asyncio.Event`` made as a flag (a stop, "synced") is fine: it is what the toolkit's waits
take. What is not is waiting on it by hand.
"""

from __future__ import annotations

import ast
import collections
import pathlib

BERTH = pathlib.Path(__file__).resolve().parents[2] / "berth"
TOOLKIT = {"util/wakeups.py", "util/aiotasks.py", "util/children.py"}
_ASYNCIO_WAITS = {"sleep", "wait", "wait_for"}


def _waits(source: str) -> list[int]:
    """The lines of ``source`` that wait by hand."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        called = node.func
        by_asyncio = isinstance(called.value, ast.Name) and called.value.id == "asyncio"
        if (by_asyncio and called.attr in _ASYNCIO_WAITS) or (
            called.attr == "wait" and not node.args and not node.keywords
        ):
            found.append(node.lineno)
    return found


def _hand_written() -> dict[str, list[int]]:
    found: dict[str, list[int]] = collections.defaultdict(list)
    for path in sorted(BERTH.rglob("*.py")):
        module = str(path.relative_to(BERTH))
        if module not in TOOLKIT:
            found[module] = _waits(path.read_text())
    return {module: lines for module, lines in found.items() if lines}


def test_the_guard_finds_hand_written_waits() -> None:
    source = (
        "async def f(stop, flag):\n"
        "    while not stop.is_set():\n"
        "        await asyncio.sleep(1)\n"
        "    await asyncio.wait_for(flag.wait(), 5)\n"
        "    await wakeups.first_set(flag, stop)\n"
    )
    assert sorted(_waits(source)) == [3, 4, 4]
    assert _waits("await wakeups.sleep_or_stop(1.0, stop=stop)\n") == []


def test_no_module_waits_by_hand() -> None:
    lines = _hand_written()
    assert not lines, f"wait with berth.util.wakeups, not by hand (module: lines): {lines}"
