"""Parsing a pod's constraints on other pods and ports (``snapshot/podconstraints``).

We test these aspects:
- affinity terms resolve their namespaces against the owner (own namespace by default, listed
  ones, every namespace for an empty namespaceSelector) and merge matchLabelKeys and
  mismatchLabelKeys with the owner's labels;
- spread constraints keep their defaults (Honor node affinity, Ignore taints) and merge
  matchLabelKeys; a nil selector selects no pod, an empty one every pod;
- host ports default to TCP on 0.0.0.0, hostNetwork makes container ports host ports, sidecars
  count and plain init containers do not; conflicts follow protocol, port and IP;
- every constraint field used is listed; a pod without any shares one empty value.
"""

from __future__ import annotations

from berth.scheduler.snapshot import podconstraints as pc
from berth.scheduler.snapshot import selectors
from tests.scheduler.constraints import specs as s

OWN = {"app": "web", "rev": "7"}


def parse(spec: dict[str, object], namespace: str = "shop") -> pc.Constraints:
    return pc.parse(spec, namespace=namespace, labels=OWN)


def test_affinity_terms_resolve_namespaces_and_label_keys() -> None:
    own = s.term(s.ZONE, s.labels(app="db"))
    listed = s.term(s.ZONE, s.labels(app="db"), namespaces=["data", "ops"])
    every = s.term(s.ZONE, s.labels(app="db"), namespace_selector={})
    keyed = {
        **s.term(s.HOSTNAME, s.labels()),
        "matchLabelKeys": ["rev", "absent"],
        "mismatchLabelKeys": ["app"],
    }
    found = parse(s.affinity(required=[own, listed], anti=[every, keyed]))
    assert found.affinity is not None
    a, b = found.affinity.required_affinity
    assert a.namespaces == frozenset({"shop"}) and a.namespace_selector is None
    assert b.namespaces == frozenset({"data", "ops"})
    c, d = found.affinity.required_anti_affinity
    assert c.matches("anywhere", {"app": "db"}) and not c.matches("anywhere", {"app": "x"})
    assert d.selector is not None
    assert d.selector.requirements == (
        selectors.Requirement("rev", selectors.IN, ("7",)),
        selectors.Requirement("app", selectors.NOT_IN, ("web",)),
    )
    assert d.matches("shop", {"rev": "7", "app": "db"})
    assert not d.matches("shop", {"rev": "7", "app": "web"})
    assert not d.matches("data", {"rev": "7", "app": "db"})
    assert found.uses == {pc.Field.POD_AFFINITY, pc.Field.POD_ANTI_AFFINITY}


def test_namespace_selector_with_labels_is_a_field_of_its_own() -> None:
    term = s.term(s.ZONE, s.labels(), namespace_selector=s.labels(team="a"))
    assert pc.Field.NAMESPACE_SELECTOR in parse(s.affinity(anti=[term])).uses


def test_spread_defaults_and_label_keys() -> None:
    nil_selector = s.spread(1, s.ZONE, None, hard=False)
    keyed = s.spread(2, s.HOSTNAME, s.labels(), match_label_keys=["rev"], min_domains=3)
    found = parse(s.spreading(nil_selector, keyed))
    first, second = found.spread
    assert (first.hard, first.selector, first.honor_node_affinity, first.honor_taints) == (
        False,
        None,
        True,
        False,
    )
    assert second.hard and second.min_domains == 3 and second.max_skew == 2
    assert second.selector is not None
    assert second.selector.matches({"rev": "7"}) and not second.selector.matches({"rev": "8"})
    assert found.uses == {pc.Field.TOPOLOGY_SPREAD}


def test_host_ports() -> None:
    spec = s.ports((80, "TCP", ""), (53, "UDP", "10.0.0.1"))
    spec["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "ports": [{"hostPort": 9000}]},
        {"name": "setup", "ports": [{"hostPort": 9001}]},
    ]
    found = parse(spec)
    assert found.host_ports == (
        pc.HostPort("UDP", "10.0.0.1", 53),
        pc.HostPort("TCP", "0.0.0.0", 80),
        pc.HostPort("TCP", "0.0.0.0", 9000),
    )
    assert parse(s.ports((8080, "TCP", ""), host_network=True)).host_ports == (
        pc.HostPort("TCP", "0.0.0.0", 8080),
    )
    any_ip, one_ip = pc.HostPort("TCP", "0.0.0.0", 80), pc.HostPort("TCP", "10.0.0.1", 80)
    assert pc.ports_conflict(any_ip, one_ip)
    assert not pc.ports_conflict(one_ip, pc.HostPort("TCP", "10.0.0.2", 80))
    assert not pc.ports_conflict(any_ip, pc.HostPort("UDP", "0.0.0.0", 80))


def test_fields_used_and_the_empty_value() -> None:
    volumes = {
        "volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "a"}},
            {"name": "b", "configMap": {"name": "b"}},
            {"name": "c", "awsElasticBlockStore": {"volumeID": "x"}},
        ],
        "resourceClaims": [{"name": "gpu"}],
        "resources": {"requests": {"cpu": "1"}},
    }
    assert parse(volumes).uses == {
        pc.Field.PERSISTENT_VOLUME_CLAIM,
        pc.Field.IN_TREE_DISK,
        pc.Field.RESOURCE_CLAIMS,
        pc.Field.POD_RESOURCES,
    }
    assert parse({"containers": [{"name": "c"}]}) is pc.EMPTY
