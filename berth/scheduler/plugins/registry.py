"""The in-tree plugins, as one registry literal, and the default profile.

This is the only module that imports every plugin (an import-linter contract says so).
:func:`in_tree_registry` returns a fresh :class:`~berth.scheduler.framework.registries.Registry`
each call (there is no process-global registry); out-of-tree plugins are added with
``Registry.merge``; :data:`RETIRED` names the removed plugins a profile is told to replace.
:data:`DEFAULT_PROFILE_YAML` is the profile Berth runs when none is given, in the order the
plugins run at each extension point.
"""

from __future__ import annotations

from berth.scheduler.framework import profiles, registries
from berth.scheduler.plugins import (
    balanced_allocation,
    default_binder,
    dynamic_resources,
    gang,
    gpu_sharing,
    image_locality,
    inter_pod_affinity,
    names,
    node_affinity,
    node_name,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    priority,
    proportion,
    queue_access,
    reservation,
    sub_groups,
    taint_toleration,
    topology,
    volume_binding,
    volume_restrictions,
)

__all__ = ["DEFAULT_PROFILE_YAML", "RETIRED", "default_profile", "in_tree_registry"]


def _folded(name: str, /) -> str:
    return (
        f"plugin {name} was folded into {names.NODE_RESOURCES_FIT}: use "
        f"{names.NODE_RESOURCES_FIT} with args.scoringStrategy.type {name}"
    )


RETIRED = {
    # Now strategies of NodeResourcesFit's scoringStrategy (one implementation), as in
    # kube-scheduler, whose v1beta2 configuration removed NodeResourcesLeastAllocated and
    # NodeResourcesMostAllocated the same way.
    names.LEAST_ALLOCATED: _folded(names.LEAST_ALLOCATED),
    names.MOST_ALLOCATED: _folded(names.MOST_ALLOCATED),
}
"""Removed plugin names, and what a profile naming one should say instead."""


def in_tree_registry() -> registries.Registry:
    """Every in-tree plugin by name."""
    return registries.Registry(
        {
            # Node basics (filters)
            names.NODE_NAME: registries.PluginFactory(new=node_name.new),
            names.NODE_UNSCHEDULABLE: registries.PluginFactory(new=node_unschedulable.new),
            names.NODE_AFFINITY: registries.PluginFactory(new=node_affinity.new),
            names.TAINT_TOLERATION: registries.PluginFactory(new=taint_toleration.new),
            names.NODE_RESOURCES_FIT: registries.PluginFactory(
                new=node_resources_fit.new, args=node_resources_fit.NodeResourcesFitArgs
            ),
            # Pod-to-pod and port constraints
            names.NODE_PORTS: registries.PluginFactory(new=node_ports.new),
            names.POD_TOPOLOGY_SPREAD: registries.PluginFactory(
                new=pod_topology_spread.new, args=pod_topology_spread.PodTopologySpreadArgs
            ),
            names.INTER_POD_AFFINITY: registries.PluginFactory(
                new=inter_pod_affinity.new, args=inter_pod_affinity.InterPodAffinityArgs
            ),
            # Shares of GPUs, and where GPU pods go (fragmentation)
            names.GPU_SHARING: registries.PluginFactory(
                new=gpu_sharing.new, args=gpu_sharing.GpuSharingArgs
            ),
            # Volumes
            names.VOLUME_RESTRICTIONS: registries.PluginFactory(new=volume_restrictions.new),
            names.NODE_VOLUME_LIMITS: registries.PluginFactory(new=node_volume_limits.new),
            names.VOLUME_BINDING: registries.PluginFactory(new=volume_binding.new),
            # Devices
            names.DYNAMIC_RESOURCES: registries.PluginFactory(new=dynamic_resources.new),
            # Scoring
            names.BALANCED_ALLOCATION: registries.PluginFactory(
                new=balanced_allocation.new, args=balanced_allocation.BalancedAllocationArgs
            ),
            names.IMAGE_LOCALITY: registries.PluginFactory(new=image_locality.new),
            # Batch: ordering and gangs
            names.PRIORITY: registries.PluginFactory(new=priority.new),
            names.GANG: registries.PluginFactory(new=gang.new, args=gang.GangArgs),
            names.SUB_GROUPS: registries.PluginFactory(new=sub_groups.new),
            names.TOPOLOGY: registries.PluginFactory(new=topology.new, args=topology.TopologyArgs),
            # Batch: queues
            names.QUEUE_ACCESS: registries.PluginFactory(new=queue_access.new),
            names.PROPORTION: registries.PluginFactory(
                new=proportion.new, args=proportion.ProportionArgs
            ),
            # Batch: reservations (reserve pods, owners)
            names.RESERVATION: registries.PluginFactory(new=reservation.new),
            # Binding
            names.DEFAULT_BINDER: registries.PluginFactory(new=default_binder.new),
        },
        retired=RETIRED,
    )


DEFAULT_PROFILE_YAML = """\
schedulerName: berth-scheduler
actions: [timelimit, allocate, backfill, reclaim, preempt]
plugins:
  # Ordering, who may use a queue, gangs (their roles first, so a role's reason is the one
  # given), the topology domains gangs go to, and queues
  - name: Priority
  - name: QueueAccess
  - name: SubGroups
  - name: Gang
  - name: Topology
  - name: Proportion
  # Reservations: before the node filters (a pod naming one is told first where it must go) and
  # before DefaultBinder (it binds reserve pods). Weight 40: a node holding an owner's
  # reservation outscores every other default score (GpuSharing's ranking adds at most 3100;
  # NodeResourcesFit, BalancedAllocation, ImageLocality, PodTopologySpread and
  # InterPodAffinity at most 700).
  - name: Reservation
    weight: 40
  # Node basics: the static filters first (cached per pod shape), then resources
  - name: NodeName
  - name: NodeUnschedulable
  - name: NodeAffinity
  - name: TaintToleration
  - name: NodePorts
  # Resources fit, and the resource score: spread cpu and memory, pack GPUs (weight 50, so a
  # GPU pod goes where GPUs are most used and whole nodes stay free for 8-GPU pods), and keep
  # cpu-only pods off GPU nodes while other nodes have room (docs/gpu.md)
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: LeastAllocated
        resources:
          - {name: cpu, weight: 1}
          - {name: memory, weight: 1}
          - {name: nvidia.com/gpu, weight: 50, type: MostAllocated}
          - {name: amd.com/gpu, weight: 50, type: MostAllocated}
        scarce: [nvidia.com/gpu, amd.com/gpu]
  # Shares of a GPU (KAI-Scheduler's gpu-fraction / gpu-memory annotations): which devices, never
  # more than one device's worth on one; and GPU pods (and cpu-only pods that would go to GPU
  # nodes) go where the fewest GPUs are left stranded for the pods arriving (fragmentation
  # gradient descent). It ranks nodes 10 points apart; weight 31: one rank outweighs the
  # spread of every resource score (at most 300), which decide only between nodes it ranks
  # alike. Inactive on clusters without GPUs (docs/gpu.md).
  - name: GpuSharing
    weight: 31
  # Volumes: a ReadWriteOncePod claim in use, CSI attach limits, claims' nodes (as kube-scheduler)
  - name: VolumeRestrictions
  - name: NodeVolumeLimits
  - name: VolumeBinding
  # Devices: every ResourceClaim of the pod allocated on the node (DRA, as kube-scheduler)
  - name: DynamicResources
  # Pods near or away from other pods, spread over domains (they read the session's placements,
  # so a gang's members constrain each other); weight 2 as in kube-scheduler
  - name: PodTopologySpread
    weight: 2
  - name: InterPodAffinity
    weight: 2
  # Scoring (NodeResourcesFit above scores resources; a bin-packing profile sets its
  # scoringStrategy type to MostAllocated)
  - name: BalancedAllocation
  - name: ImageLocality
  # Binding
  - name: DefaultBinder
"""
"""The default profile, as a user would write it."""


def default_profile() -> profiles.Profile:
    """The default profile (parsed from :data:`DEFAULT_PROFILE_YAML`)."""
    return profiles.load(DEFAULT_PROFILE_YAML, source="the default profile")
