"""The operator process's exceptions.

::

    OperatorError
     ├── ConfigFileError       the --config file cannot be read or is not a YAML mapping
     └── LeadershipLost        this replica led and lost the Lease: the process must exit non-zero

``berth.cli.run`` turns :class:`ConfigFileError` into a usage error (exit 2) and
:class:`LeadershipLost` into exit code 1, as kube-scheduler exits when its lease is lost.
"""

from __future__ import annotations

__all__ = ["ConfigFileError", "LeadershipLost", "OperatorError"]


class OperatorError(Exception):
    """Base of the operator process's errors."""


class ConfigFileError(OperatorError):
    """The configuration file cannot be used; the message names the file and the problem."""


class LeadershipLost(OperatorError):
    """This replica was the leader and is no longer; leader-only work has been stopped."""
