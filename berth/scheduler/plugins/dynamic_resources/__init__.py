"""DynamicResources: devices for pods through ResourceClaims (``resource.k8s.io/v1``), as
kube-scheduler's DynamicResources plugin allocates them with structured parameters.

The package: :mod:`.capacity` (consumable capacity), :mod:`.inuse` (which devices are taken,
the session's changes included), :mod:`.allocator` (the search for one node), :mod:`.ledger`
(a session's allocations and reservations) and :mod:`.plugin` (the plugin). This module is
its façade: the registry and tests import the plugin through it.
"""

# isort: skip_file
from berth.scheduler.plugins.dynamic_resources.plugin import NAME, DynamicResources, new

__all__ = ["NAME", "DynamicResources", "new"]
