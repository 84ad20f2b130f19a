"""Admission: may a pod use its queue; admission mode (Berth decides, kube-scheduler binds).

Admission mode holds Berth's pods behind a scheduling gate, pins each to the node Berth chose and
removes the gate, keeping a ledger of the pending allocations in step with the scheduler's cache,
and remembers what kube-scheduler refused. The admission webhook's queue look-up is here too.
"""
