"""The PodGroup controller's Kopf side: the watcher that records every PodGroup.

What a PodGroup's status should be is :mod:`berth.status.podgroups` (pure, shared with
``berth sim``); Kopf's status handler (:mod:`berth.controllers.statuses`) writes it.
:func:`register` adds the Kopf watching handler that keeps
:class:`~berth.controllers.observed.ObservedObjects` current (no finalizer needed).
"""

from __future__ import annotations

import kopf

from berth.api import podgroups
from berth.controllers import observed

__all__ = ["KIND", "register"]

KIND = podgroups.KIND


def register(registry: kopf.OperatorRegistry, *, objects: observed.ObservedObjects) -> None:
    """Add the watching handler recording every PodGroup into ``objects``."""
    observed.register_watcher(registry, kind=KIND, plural=podgroups.PLURAL, objects=objects)
