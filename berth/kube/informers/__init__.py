"""The cluster view: informers that list and watch every kind but Berth's, and the snapshot source.

Each watched change reaches the scheduler's :class:`~berth.scheduler.snapshot.cache.ClusterCache`
through these modules; the scheduling loop takes its snapshots from it through
:class:`~berth.kube.informers.snapshots.CacheSource`.
"""
