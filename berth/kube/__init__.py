"""The only package that talks to the Kubernetes API, one package per concern.

- :mod:`~berth.kube.transport`: clients, raw REST, discovery, list and watch, the fenced write
  primitive, Events, Leases, delegated reviews, pod request bodies. Everything below builds on it.
- :mod:`~berth.kube.informers`: the cluster view (one watch per kind into the ``ClusterCache``)
  and the scheduler's snapshot source.
- :mod:`~berth.kube.devices`: ResourceClaims' allocations and shared GPUs' reservation pods.
- :mod:`~berth.kube.reservations`: Reservations' status facts and writes.
- :mod:`~berth.kube.binder`: the binding cycle (bind, evict, annotate, explain, the PreBind waits).
- :mod:`~berth.kube.grouping`: groups derived from owners, other schedulers' gangs, the
  ``default`` Queue.
- :mod:`~berth.kube.autoscaling`: capacity requests to autoscalers and nodes kept from them.
- :mod:`~berth.kube.admission`: admission mode and the admission webhook's queue look-up.

Their layering, ``admission > (binder | grouping | autoscaling) > (informers | devices |
reservations) > transport``, is an import-linter contract (pyproject.toml).
"""
