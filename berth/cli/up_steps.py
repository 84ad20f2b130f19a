"""What ``berth up`` prints next, the same on the embedded cluster and the real control plane.

The commands depend on the mode: in scheduler mode the examples' pods name Berth's scheduler;
in admission mode a pod is Berth's by its labels or its namespace, so the steps say which pods
the webhook gates, how to opt a namespace in, and who binds the pods Berth admits.
"""

from __future__ import annotations

import pathlib

from berth.operator import settings

__all__ = ["ADMISSION_NAMESPACES", "next_steps"]

ADMISSION_NAMESPACES = ("optIn", "all")
"""The chart's ``admission.namespaces`` values (``berth up --admission-namespaces``): which
namespaces Berth gates whole, every pod. ``optIn``: those labelled
``scheduling.berth.io/admission=enabled``; ``all``: every namespace not labelled ``=disabled``
(Kueue's ``manageJobsWithoutQueueName``)."""


def next_steps(
    *, mode: settings.Mode, kubeconfig: pathlib.Path, binder: str, namespaces: str = "optIn"
) -> str:
    """What to type next, for the mode chosen; ``binder`` is who binds admitted pods;
    ``namespaces`` the chart's ``admission.namespaces`` (``optIn`` or ``all``)."""
    lines = [f"  export KUBECONFIG={kubeconfig}   # the kubeconfig written for kubectl"]
    if mode is settings.Mode.ADMISSION:
        if namespaces == "all":
            reach = (
                "  Admission mode: Berth's webhook gates every new pod of every namespace but "
                "kube-system and berth-system (--admission-namespaces all, the chart's "
                "admission.namespaces=all), but in a namespace labelled "
                "scheduling.berth.io/admission=disabled, where it gates only pods that carry "
                "the label scheduling.berth.io/queue or scheduling.berth.io/pod-group; Berth "
                f"pins the pods it admits to their node and removes the gate, and {binder} "
                "binds them. A Job's pods start together, as one gang, or not at all."
            )
            opt = (
                "  kubectl label namespace default scheduling.berth.io/admission=disabled"
                "   # to opt a namespace out"
            )
        else:
            reach = (
                "  Admission mode: Berth's webhook gates each new pod that carries the label "
                "scheduling.berth.io/queue or scheduling.berth.io/pod-group (in any namespace "
                "but kube-system and berth-system), and every new pod of a namespace labelled "
                "scheduling.berth.io/admission=enabled; Berth pins the pods it admits to their "
                f"node and removes the gate, and {binder} binds them. Other pods are not gated: "
                "a Job's pods there are started one by one, as they fit. (--admission-namespaces "
                "all, or the chart's admission.namespaces=all, gates every namespace's pods but "
                "kube-system's and berth-system's, and those of namespaces labelled "
                "scheduling.berth.io/admission=disabled.)"
            )
            opt = (
                "  kubectl label namespace default scheduling.berth.io/admission=enabled"
                "   # opt the namespace in"
            )
        lines[:0] = [reach]
        lines += [
            "  kubectl apply -f examples/01-queues/",
            opt,
            "  kubectl run hello --image=busybox:1.37 --restart=Never "
            "--annotations=sim.berth.io/duration=30s --labels=scheduling.berth.io/queue=team-a"
            " -- sleep 30",
        ]
    else:
        lines += ["  kubectl apply -f examples/01-queues/ -f examples/02-gang/"]
    lines += ["  kubectl get berth,pods -o wide"]
    return "\n".join(lines)
