"""Did you mean...? (``berth.util.suggestions``): the closest known name, never an unrelated one
and never the name itself."""

from __future__ import annotations

import pytest

from berth.util import suggestions


@pytest.mark.parametrize(
    ("name", "known", "best"),
    [
        ("defualt", ["default", "research"], "default"),
        ("team-c", ["team-a", "research"], "team-a"),
        ("gpu", ["default", "research"], None),
        ("research", ["research"], None),
        ("anything", [], None),
    ],
)
def test_the_closest_known_name(name: str, known: list[str], best: str | None) -> None:
    assert suggestions.did_you_mean(name, known) == best
    assert suggestions.suffix(name, known) == (f" (did you mean {best}?)" if best else "")
