"""In-memory cluster and virtual clock: the same scheduler without an API server (``berth sim``).

- :mod:`~berth.sim.scenarios` — the Scenario file (``sim.berth.io/v1alpha1``), loaded with
  errors naming the path and line (:mod:`~berth.sim.locations`, :mod:`~berth.sim.errors`);
- :mod:`~berth.sim.workloads`, :mod:`~berth.sim.traces`, :mod:`~berth.sim.nodespecs` — what
  arrives and on which nodes;
- :mod:`~berth.sim.cluster` — ``InMemoryCluster``, the snapshot source and decision sink;
- :mod:`~berth.sim.events`, :mod:`~berth.sim.runner` — virtual time and the loop;
- :mod:`~berth.sim.records`, :mod:`~berth.sim.fairness`, :mod:`~berth.sim.reports`,
  :mod:`~berth.sim.tables`, :mod:`~berth.sim.plots` — what happened, as JSON, tables, a PNG;
- :mod:`~berth.sim.stress` (``berth bench sim``) and :mod:`~berth.sim.benchmarks` (the core's
  ``berth bench basic|gang|cycle``).
"""
