"""The Queue controller's Kopf side: the watcher that records every Queue.

What a Queue's status should be is :mod:`berth.status.queues` (pure, shared with ``berth
sim``); Kopf's status handler (:mod:`berth.controllers.statuses`) writes it.
:func:`register` adds the Kopf watching handler that keeps
:class:`~berth.controllers.observed.ObservedObjects` current (no finalizer needed).
"""

from __future__ import annotations

import kopf

from berth.api import queues
from berth.controllers import observed

__all__ = ["KIND", "register"]

KIND = queues.KIND


def register(registry: kopf.OperatorRegistry, *, objects: observed.ObservedObjects) -> None:
    """Add the watching handler recording every Queue into ``objects``."""
    observed.register_watcher(registry, kind=KIND, plural=queues.PLURAL, objects=objects)
