"""What each of Berth's kinds' status should be: pure owners shared by the operator and the sim.

One module per kind (:mod:`.podgroups`, :mod:`.queues`, :mod:`.reservations`), each a pure
function from facts to the status an object should have; :mod:`.cycles` derives a cycle's
facts once for all objects, :mod:`.conditions` is the one rule for conditions, and
:mod:`.observations` is the object as an owner reads it. The live operator's writers
(:mod:`berth.controllers.statuses`, :mod:`berth.kube.reservations.reservation_statuses`) and ``berth
sim`` (:mod:`berth.sim.cluster`) call the same functions, so the cluster and the simulator cannot
drift. Nothing here does I/O; import-linter keeps Kopf and the Kubernetes clients out
(docs/architecture.md, "Status owners").
"""
