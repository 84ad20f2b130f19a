"""The in-tree registry and the default profile.

We test these aspects:
- every in-tree name is registered once and its factory builds a plugin of that name with its
  default args; ours implement the protocols they claim (the Python form of Go's
  "var _ FilterPlugin = &X{}");
- each call returns a fresh registry (nothing global), and merging a clashing name fails;
- the default profile parses from its YAML, resolves against the registry and the actions,
  and lists the plugins in the documented order; a bad arg is reported with its path.
"""

from __future__ import annotations

import pytest

from berth.scheduler.actions import registry as actions_registry
from berth.scheduler.framework import errors, handles, interfaces, profiles, registries
from berth.scheduler.plugins import names, registry
from berth.util import clocks

EXPECTED = {
    names.NODE_NAME: (interfaces.StaticFilterPlugin,),
    names.NODE_UNSCHEDULABLE: (interfaces.StaticFilterPlugin,),
    names.NODE_AFFINITY: (interfaces.StaticFilterPlugin, interfaces.ScorePlugin),
    names.TAINT_TOLERATION: (interfaces.StaticFilterPlugin, interfaces.ScorePlugin),
    names.NODE_RESOURCES_FIT: (interfaces.PreFilterPlugin, interfaces.FilterPlugin),
    names.NODE_PORTS: (interfaces.FilterPlugin, interfaces.ConstraintPlugin),
    names.POD_TOPOLOGY_SPREAD: (
        interfaces.FilterPlugin,
        interfaces.ScorePlugin,
        interfaces.ConstraintPlugin,
    ),
    names.INTER_POD_AFFINITY: (
        interfaces.FilterPlugin,
        interfaces.ScorePlugin,
        interfaces.ConstraintPlugin,
    ),
    names.VOLUME_RESTRICTIONS: (interfaces.PreFilterPlugin,),
    names.NODE_VOLUME_LIMITS: (interfaces.PreFilterPlugin, interfaces.FilterPlugin),
    names.VOLUME_BINDING: (
        interfaces.FilterPlugin,
        interfaces.PreBindPlugin,
        interfaces.ConstraintPlugin,
    ),
    names.DYNAMIC_RESOURCES: (
        interfaces.PreFilterPlugin,
        interfaces.FilterPlugin,
        interfaces.ReservePlugin,
        interfaces.PreBindPlugin,
        interfaces.SessionPlugin,
        interfaces.ConstraintPlugin,
    ),
    names.GPU_SHARING: (
        interfaces.PreFilterPlugin,
        interfaces.FilterPlugin,
        interfaces.ScorePlugin,
        interfaces.ReservePlugin,
        interfaces.PreBindPlugin,
        interfaces.SessionPlugin,
        interfaces.ConstraintPlugin,
    ),
    names.BALANCED_ALLOCATION: (interfaces.ScorePlugin,),
    names.IMAGE_LOCALITY: (interfaces.ScorePlugin,),
    names.PRIORITY: (interfaces.QueueSortPlugin, interfaces.SessionPlugin),
    names.GANG: (interfaces.SessionPlugin,),
    names.PROPORTION: (interfaces.SessionPlugin,),
    names.QUEUE_ACCESS: (interfaces.SessionPlugin,),
    names.DEFAULT_BINDER: (interfaces.BindPlugin,),
}


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_every_factory_builds_its_plugin(name: str) -> None:
    factory = registry.in_tree_registry()[name]
    plugin = factory.build(
        factory.validate_args({}), handle=handles.ExtendedHandle(clock=clocks.VirtualClock())
    )
    assert plugin.name == name
    for protocol in EXPECTED[name]:
        assert isinstance(plugin, protocol)
    static = isinstance(plugin, interfaces.StaticFilterPlugin)
    assert static is (interfaces.StaticFilterPlugin in EXPECTED[name])


@pytest.mark.parametrize("name", sorted(registry.in_tree_registry()))
def test_every_registered_name_builds_a_plugin_of_that_name(name: str) -> None:
    factory = registry.in_tree_registry()[name]
    plugin = factory.build(
        factory.validate_args({}), handle=handles.ExtendedHandle(clock=clocks.VirtualClock())
    )
    assert plugin.name == name


def test_the_registry_is_fresh_and_complete() -> None:
    one, two = registry.in_tree_registry(), registry.in_tree_registry()
    assert one is not two
    assert set(EXPECTED) <= set(one)
    with pytest.raises(errors.RegistryError, match="a plugin named Gang already exists"):
        one.merge({names.GANG: registries.PluginFactory(new=lambda args, handle: None)})  # type: ignore[arg-type,return-value]


def test_the_default_profile_resolves() -> None:
    profile = registry.default_profile()
    resolved = profiles.resolve(
        profile,
        registry=registry.in_tree_registry(),
        actions={a.name for a in actions_registry.default_actions()},
    )
    assert resolved.scheduler_name == "berth-scheduler"
    assert resolved.actions == ("timelimit", "allocate", "backfill", "reclaim", "preempt")
    assert [p.name for p in resolved.plugins] == [
        "Priority",
        "QueueAccess",
        "SubGroups",
        "Gang",
        "Topology",
        "Proportion",
        "Reservation",
        "NodeName",
        "NodeUnschedulable",
        "NodeAffinity",
        "TaintToleration",
        "NodePorts",
        "NodeResourcesFit",
        "GpuSharing",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "DynamicResources",
        "PodTopologySpread",
        "InterPodAffinity",
        "BalancedAllocation",
        "ImageLocality",
        "DefaultBinder",
    ]


def test_bad_args_are_reported_with_their_path() -> None:
    profile = profiles.load(
        "plugins:\n  - name: Gang\n    args: {defaultScheduleTimeoutSeconds: -1}\n"
    )
    with pytest.raises(
        errors.ProfileError, match=r"plugins\[0\]\.args\.defaultScheduleTimeoutSeconds"
    ):
        profiles.resolve(profile, registry=registry.in_tree_registry(), actions={"allocate"})
