"""The framework's public surface (R2): ``__all__`` is sorted and names exactly what is public.

We test these aspects:
- ``__all__`` is sorted;
- every public attribute of the package that is not a submodule is in ``__all__``, and every
  name in ``__all__`` exists.
"""

from __future__ import annotations

import types

import berth.scheduler.framework as framework


def test_all_is_sorted() -> None:
    assert framework.__all__ == sorted(framework.__all__)


def test_all_lists_every_public_name_and_nothing_else() -> None:
    public = {
        name
        for name, value in vars(framework).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"  # from __future__
    }
    assert set(framework.__all__) == public
