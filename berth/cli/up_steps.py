"""What ``berth up`` prints next, the same on the embedded cluster and the real control plane.

The commands depend on the mode: in scheduler mode the examples' pods name Berth's scheduler;
in admission mode a pod is Berth's by its labels or its namespace, so the steps say which pods
the webhook gates, how to opt a namespace in, and who binds the pods Berth admits.
"""

from __future__ import annotations

import pathlib

from berth.operator import settings

__all__ = ["next_steps"]


def next_steps(*, mode: settings.Mode, kubeconfig: pathlib.Path, binder: str) -> str:
    """What to type next, for the mode chosen; ``binder`` is who binds admitted pods."""
    lines = [f"  export KUBECONFIG={kubeconfig}   # the kubeconfig written for kubectl"]
    if mode is settings.Mode.ADMISSION:
        lines[:0] = [
            "  Admission mode: Berth's webhook gates each new pod that carries the label "
            "scheduling.berth.io/queue or scheduling.berth.io/pod-group (in any namespace but "
            "kube-system and berth-system), and every new pod of a namespace labelled "
            "scheduling.berth.io/admission=enabled; Berth pins the pods it admits to their "
            f"node and removes the gate, and {binder} binds them. Other pods are not gated: "
            "a Job's pods there are started one by one, as they fit. (Installed with Helm, "
            "--set admission.namespaces=all gates every namespace's pods but kube-system's and "
            "berth-system's, and those of namespaces labelled "
            "scheduling.berth.io/admission=disabled.)",
        ]
        lines += [
            "  kubectl apply -f examples/01-queues/",
            "  kubectl label namespace default scheduling.berth.io/admission=enabled"
            "   # opt the namespace in",
            "  kubectl run hello --image=busybox:1.37 --restart=Never "
            "--annotations=sim.berth.io/duration=30s --labels=scheduling.berth.io/queue=team-a"
            " -- sleep 30",
        ]
    else:
        lines += ["  kubectl apply -f examples/01-queues/ -f examples/02-gang/"]
    lines += ["  kubectl get berth,pods -o wide"]
    return "\n".join(lines)
