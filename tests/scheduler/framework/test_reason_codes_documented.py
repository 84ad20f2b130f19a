"""Every reason code users can see in a condition is listed in docs/architecture.md.

We test that each ``ReasonCode`` value appears, in backquotes, in the codes table of the
"Reasons" section, so a new code cannot ship without saying what kind of obstacle it is.
"""

from __future__ import annotations

import pathlib

from berth.scheduler.framework import reasons

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "architecture.md"


def _codes_table() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Reasons") :]
    start = section.index("| code ")
    end = section.index("\n\n", start)
    return section[start:end]


def test_every_code_is_in_the_table() -> None:
    table = _codes_table()
    missing = [code.value for code in reasons.ReasonCode if f"`{code.value}`" not in table]
    assert missing == []
