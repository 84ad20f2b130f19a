"""An in-memory Kubernetes API server with simulated nodes, that real clients accept.

It is the test bed for every real-client test (kubectl, kopf, ``kubernetes``,
``kubernetes_asyncio``, Helm) and the cluster behind ``berth up``. The modules, bottom up:

- :mod:`~berth.emulator.errors` (Status objects), :mod:`~berth.emulator.resources` (what is
  served), :mod:`~berth.emulator.storage` (objects, resourceVersions, the event log);
- :mod:`~berth.emulator.selectors`, :mod:`~berth.emulator.patches`,
  :mod:`~berth.emulator.jsonpaths`, :mod:`~berth.emulator.tables`,
  :mod:`~berth.emulator.renderings`, :mod:`~berth.emulator.cel`,
  :mod:`~berth.emulator.validation`, :mod:`~berth.emulator.protobuf`,
  :mod:`~berth.emulator.addresses`: pure helpers;
- :mod:`~berth.emulator.strategies`, :mod:`~berth.emulator.pods`, :mod:`~berth.emulator.crds`
  and :mod:`~berth.emulator.rest` (the API's semantics, also the in-process Python API);
- :mod:`~berth.emulator.discovery`, :mod:`~berth.emulator.openapi` (v3),
  :mod:`~berth.emulator.openapiv2`,
  :mod:`~berth.emulator.routes`, :mod:`~berth.emulator.watches`,
  :mod:`~berth.emulator.webhooks`, :mod:`~berth.emulator.handlers`,
  :mod:`~berth.emulator.faults` and :mod:`~berth.emulator.server` (HTTP);
- :mod:`~berth.emulator.kubelets` (simulated nodes), :mod:`~berth.emulator.binder` (a stand-in
  for kube-scheduler), :mod:`~berth.emulator.bench`
  (throughput), :mod:`~berth.emulator.testing` (the pytest plugin).
"""
