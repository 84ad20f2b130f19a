"""The ``berth.api`` façade (STYLE.md R2).

We test these aspects:
- ``__all__`` is sorted, without duplicates, and every name in it exists;
- every public class of the model modules is exported (by identity: the façade may rename,
  e.g. ``QuantityFormat``);
- nothing private leaks through the façade.
"""

from __future__ import annotations

import inspect
import types

import pytest

import berth.api
from berth.api import durations, errors, meta, podgroups, pods, quantities, queues, reservations


def test_all_is_sorted_and_unique() -> None:
    assert berth.api.__all__ == sorted(set(berth.api.__all__))


def test_every_exported_name_exists() -> None:
    missing = [name for name in berth.api.__all__ if not hasattr(berth.api, name)]
    assert missing == []


def test_no_private_name_is_exported() -> None:
    assert [name for name in berth.api.__all__ if name.startswith("_")] == []


MODEL_MODULES = [durations, errors, meta, pods, podgroups, quantities, queues, reservations]
by_model_module = pytest.mark.parametrize(
    "module", MODEL_MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODEL_MODULES]
)


@by_model_module
def test_every_public_class_of_a_model_module_is_exported(module: types.ModuleType) -> None:
    names = module.__all__
    classes = [n for n in names if inspect.isclass(getattr(module, n))]
    assert classes, "the module declares public classes"
    exported = [getattr(berth.api, name) for name in berth.api.__all__]
    assert [n for n in classes if getattr(module, n) not in exported] == []


@by_model_module
def test_module_all_is_sorted(module: types.ModuleType) -> None:
    names = module.__all__
    assert names == sorted(names)
