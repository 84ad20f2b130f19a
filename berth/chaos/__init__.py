"""Chaos harnesses: experiments that break Berth on purpose and count what it did wrong.

Each harness points at any kubeconfig (the emulator, a local control plane, a real cluster),
starts Berth replicas as ``berth run`` processes on this machine, injects one kind of fault and
checks invariants from what the API server recorded — its audit log (kube-apiserver's
``--audit-log-path``, or the emulator's ``--audit-log``) and the objects it stores — never from
Berth's own account of itself. ``berth chaos ...`` runs them and prints JSON.
"""
