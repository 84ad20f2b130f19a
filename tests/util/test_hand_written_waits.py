"""Berth waits and wakes with one toolkit, ``berth.util.wakeups`` (issue #31).

We test these aspects:

- no module of ``berth/`` waits by hand — ``asyncio.sleep``, ``asyncio.wait``,
  ``asyncio.wait_for`` or a ``.wait()`` call (an event's, a condition's) — but the toolkit
  itself (``util/wakeups.py``, ``util/aiotasks.py``, and ``util/children.py`` for child
  processes) and the modules listed in ``PENDING``,
  whose waits are still to be moved onto it; a listed module with fewer such waits than listed
  fails too, so the list only shrinks;
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

# Module -> how many hand-written waits it still has. Some of the CLI's and the chaos tools'
# are a subprocess's or a thread's ``.wait()``, not an event loop's; they are counted alike.
PENDING = {
    "chaos/fuzz.py": 2,
    "chaos/proxy.py": 3,
    "chaos/sigstop.py": 3,
}


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


def test_no_module_waits_by_hand_but_those_pending() -> None:
    lines = _hand_written()
    found = {module: len(at) for module, at in lines.items()}
    new = {m: at for m, at in lines.items() if m not in PENDING}
    assert not new, f"wait with berth.util.wakeups, not by hand (module: lines): {new}"
    moved = {m: (PENDING[m], found.get(m, 0)) for m in PENDING if found.get(m, 0) != PENDING[m]}
    assert not moved, f"PENDING is out of date (module: (listed, found)); shrink it: {moved}"
