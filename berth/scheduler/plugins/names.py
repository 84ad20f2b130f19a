"""The names in-tree plugins are registered and configured under (one place, no typos).

Plugin modules set ``NAME = names.X``; profiles and the registry use the same constants.
"""

from __future__ import annotations

__all__ = [
    "BALANCED_ALLOCATION",
    "DEFAULT_BINDER",
    "DYNAMIC_RESOURCES",
    "GANG",
    "GPU_SHARING",
    "IMAGE_LOCALITY",
    "INTER_POD_AFFINITY",
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "NODE_AFFINITY",
    "NODE_NAME",
    "NODE_PORTS",
    "NODE_RESOURCES_FIT",
    "NODE_UNSCHEDULABLE",
    "NODE_VOLUME_LIMITS",
    "POD_TOPOLOGY_SPREAD",
    "PRIORITY",
    "PROPORTION",
    "QUEUE_ACCESS",
    "RESERVATION",
    "SUB_GROUPS",
    "TAINT_TOLERATION",
    "VOLUME_BINDING",
    "VOLUME_RESTRICTIONS",
    "TOPOLOGY",
]

# Node basics (filters)
NODE_NAME = "NodeName"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_AFFINITY = "NodeAffinity"
TAINT_TOLERATION = "TaintToleration"
NODE_RESOURCES_FIT = "NodeResourcesFit"

# Pod-to-pod and port constraints (filters and scores over the session's placements)
NODE_PORTS = "NodePorts"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"

# Volumes (filters over the snapshot's claims, volumes, classes and CSI attach limits)
VOLUME_RESTRICTIONS = "VolumeRestrictions"
NODE_VOLUME_LIMITS = "NodeVolumeLimits"
VOLUME_BINDING = "VolumeBinding"

# Devices (Dynamic Resource Allocation: claims, classes, slices)
DYNAMIC_RESOURCES = "DynamicResources"

# Shares of GPUs (KAI-Scheduler's annotations) and where GPU pods go (fragmentation)
GPU_SHARING = "GpuSharing"

# Scoring
BALANCED_ALLOCATION = "BalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"

# Batch: ordering, gangs, queues, reservations
PRIORITY = "Priority"
GANG = "Gang"
SUB_GROUPS = "SubGroups"
TOPOLOGY = "Topology"
PROPORTION = "Proportion"
QUEUE_ACCESS = "QueueAccess"
RESERVATION = "Reservation"

# Binding
DEFAULT_BINDER = "DefaultBinder"

# Retired: no plugin answers to these; a profile naming one is refused with what to write
# instead (the registry's ``retired`` map), as kube-scheduler did when it removed them.
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
