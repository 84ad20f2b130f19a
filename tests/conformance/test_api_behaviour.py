"""What Berth relies on from an API server, checked on the emulator and on kube-apiserver alike.

We test these aspects, each with the real kubectl (and its raw requests where kubectl has no
verb), on both servers:
- create, apply (client- and server-side, with a field-manager conflict), merge/JSON/strategic
  patches, replace; a replace at a stale resourceVersion is a 409;
- watch from a resourceVersion replays what came after it (410 Gone for a compacted version is
  the emulator's tests' business: a young real cluster has compacted nothing);
- label and field selectors;
- Table output with a CRD's printer columns, and the protobuf bodies kubectl sends
  (``kubectl create namespace``);
- finalizers hold a deleted object until removed; the status subresource is separate from the
  main resource;
- a CEL rule refuses with its message;
- scheduling gates can only be removed, never added; a gated pod's node affinity may be narrowed;
- bindings set the node once (a second is a 409); an eviction removes a pod.
"""

from __future__ import annotations

import json

import yaml

from berth.api import keys
from tests.conformance.conftest import Obj, Server


def _configmap(name: str, **data: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                           "data": data})  # fmt: skip


def _pod(name: str, **spec: object) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "schedulerName": "nobody",  # neither scheduler places it: the test binds it
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            **spec,
        },
    }


def test_create_apply_patch_replace(server: Server) -> None:
    ns = server.namespace()
    server.kubectl("create", "-n", ns, "-f", "-", input=_configmap("cm", a="1"))
    server.kubectl("apply", "-n", ns, "-f", "-", input=_configmap("cm", a="2"))
    server.kubectl("patch", "-n", ns, "cm", "cm", "--type=merge", "-p", '{"data":{"b":"3"}}')
    server.kubectl("patch", "-n", ns, "cm", "cm", "--type=json",
                   "-p", '[{"op":"replace","path":"/data/a","value":"4"}]')  # fmt: skip
    server.kubectl("patch", "-n", ns, "cm", "cm", "-p", '{"data":{"c":"5"}}')  # strategic
    current = server.json("get", "-n", ns, "cm", "cm")
    assert current["data"] == {"a": "4", "b": "3", "c": "5"}
    current["data"] = {"only": "this"}
    server.kubectl("replace", "-n", ns, "-f", "-", input=json.dumps(current))
    assert server.json("get", "-n", ns, "cm", "cm")["data"] == {"only": "this"}
    stale = server.kubectl("replace", "-n", ns, "-f", "-", input=json.dumps(current), check=False)
    assert stale.returncode != 0
    assert "the object has been modified" in stale.stderr


def test_server_side_apply_owns_fields(server: Server) -> None:
    ns = server.namespace()
    body = _configmap("ssa", a="1")
    server.kubectl("apply", "--server-side", "--field-manager=one", "-n", ns, "-f", "-", input=body)
    clash = server.kubectl("apply", "--server-side", "--field-manager=two", "-n", ns, "-f", "-",
                           input=_configmap("ssa", a="2"), check=False)  # fmt: skip
    if server.name == "emulator":
        # Known difference (docs/emulator.md): no managedFields, so no field-manager conflicts.
        assert clash.returncode == 0
        return
    assert clash.returncode != 0 and "conflict" in clash.stderr.lower()
    server.kubectl("apply", "--server-side", "--field-manager=two", "--force-conflicts",
                   "-n", ns, "-f", "-", input=_configmap("ssa", a="2"))  # fmt: skip
    assert server.json("get", "-n", ns, "cm", "ssa")["data"] == {"a": "2"}


def test_watch_from_a_version_replays_what_came_after(server: Server) -> None:
    ns = server.namespace()
    server.kubectl("create", "-n", ns, "-f", "-", input=_configmap("w1"))
    version = server.json("get", "-n", ns, "cm", "w1")["metadata"]["resourceVersion"]
    server.kubectl("create", "-n", ns, "-f", "-", input=_configmap("w2"))
    out = server.raw(
        f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={version}&timeoutSeconds=1"
    )
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    names = [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]
    assert "w2" in names and "w1" not in names


def test_unknown_fields_are_refused_by_strict_field_validation(server: Server) -> None:
    ns = server.namespace()
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"kind": "Pod", **_pod("x")}}}  # fmt: skip
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    refused = server.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(job), check=False)
    if server.name == "emulator":
        # Known difference (docs/emulator.md): built-in kinds other than Pods are stored
        # without a schema, so unknown fields are kept instead of refused.
        assert refused.returncode == 0
        return
    assert refused.returncode != 0
    assert 'unknown field "spec.template.kind"' in refused.stderr


def test_label_and_field_selectors(server: Server) -> None:
    ns = server.namespace()
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        pod = _pod(name)
        pod["metadata"]["labels"]["tier"] = tier
        server.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(pod))
    picked = server.kubectl("get", "pods", "-n", ns, "-l", "tier=web,app!=c", "-o", "name").stdout
    assert picked.split() == ["pod/a"]
    inset = server.kubectl("get", "pods", "-n", ns, "-l", "tier in (db)", "-o", "name").stdout
    assert inset.split() == ["pod/b"]
    fields = server.kubectl(
        "get", "pods", "-n", ns, "--field-selector", "metadata.name=c,status.phase=Pending",
        "-o", "name",
    ).stdout  # fmt: skip
    assert fields.split() == ["pod/c"]


def test_table_output_and_protobuf_bodies(server: Server) -> None:
    name = server.namespace()  # kubectl create namespace sends a protobuf body
    assert server.json("get", "namespace", name)["status"]["phase"] == "Active"
    # A CRD's printer columns come back as the Table kubectl prints.
    queue = {"apiVersion": keys.API_VERSION, "kind": "Queue", "metadata": {"name": f"t-{name}"},
             "spec": {"weight": 3}}  # fmt: skip
    server.kubectl("create", "-f", "-", input=json.dumps(queue))
    rows = server.kubectl("get", "bq", f"t-{name}").stdout.splitlines()
    assert rows[0].split()[:3] == ["NAME", "STATE", "PARENT"]
    assert rows[1].split()[0] == f"t-{name}"
    server.kubectl("delete", "queue", f"t-{name}")
    header = server.kubectl("get", "crd", "queues.scheduling.berth.io").stdout.splitlines()[0]
    assert header.split()[:2] == ["NAME", "CREATED"]


def test_finalizers_hold_a_deleted_object(server: Server) -> None:
    ns = server.namespace()
    body = yaml.safe_load(_configmap("held"))
    body["metadata"]["finalizers"] = ["example.com/hold"]
    server.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(body))
    server.kubectl("delete", "-n", ns, "cm", "held", "--wait=false")
    held = server.json("get", "-n", ns, "cm", "held")
    assert held["metadata"]["deletionTimestamp"]
    server.kubectl("patch", "-n", ns, "cm", "held", "--type=merge",
                   "-p", '{"metadata":{"finalizers":null}}')  # fmt: skip
    assert server.kubectl("get", "-n", ns, "cm", "held", check=False).returncode != 0


def test_status_is_a_subresource(server: Server) -> None:
    name = f"q-{server.namespace()}"
    queue = {"apiVersion": keys.API_VERSION, "kind": "Queue", "metadata": {"name": name},
             "spec": {}, "status": {"pending": 7}}  # fmt: skip
    server.kubectl("create", "-f", "-", input=json.dumps(queue))
    assert "pending" not in (server.json("get", "queue", name).get("status") or {})
    server.kubectl("patch", "queue", name, "--subresource=status", "--type=merge",
                   "-p", '{"status":{"pending":3}}')  # fmt: skip
    server.kubectl("patch", "queue", name, "--type=merge", "-p", '{"status":{"pending":9}}')
    assert server.json("get", "queue", name)["status"]["pending"] == 3
    server.kubectl("delete", "queue", name)


def test_a_cel_rule_refuses_with_its_message(server: Server) -> None:
    queue = {"apiVersion": keys.API_VERSION, "kind": "Queue", "metadata": {"name": "loop"},
             "spec": {"parent": "loop"}}  # fmt: skip
    refused = server.kubectl("create", "-f", "-", input=json.dumps(queue), check=False)
    assert refused.returncode != 0
    assert "spec.parent" in refused.stderr and "own parent" in refused.stderr


def test_scheduling_gates_may_only_be_removed(server: Server) -> None:
    ns = server.namespace()
    gated = _pod("gated", schedulingGates=[{"name": "example.com/wait"}])
    server.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(gated))
    server.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(_pod("free")))
    added = server.kubectl("patch", "-n", ns, "pod", "free", "--type=merge",
                           "-p", '{"spec":{"schedulingGates":[{"name":"example.com/late"}]}}',
                           check=False)  # fmt: skip
    assert added.returncode != 0
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": server.nodes[:1]}]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    narrow = {"spec": {"affinity": {"nodeAffinity": required}}}
    server.kubectl("patch", "-n", ns, "pod", "gated", "--type=merge", "-p", json.dumps(narrow))
    server.kubectl("patch", "-n", ns, "pod", "gated", "--type=json",
                   "-p", '[{"op":"remove","path":"/spec/schedulingGates"}]')  # fmt: skip
    assert not server.json("get", "-n", ns, "pod", "gated")["spec"].get("schedulingGates")


def _bind(server: Server, ns: str, pod: str, node: str) -> tuple[int, str]:
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}}  # fmt: skip
    result = server.kubectl(
        "create", "--raw", f"/api/v1/namespaces/{ns}/pods/{pod}/binding", "-f", "-",
        input=json.dumps(binding), check=False,
    )  # fmt: skip
    return result.returncode, result.stdout + result.stderr


def test_binding_sets_the_node_once_and_eviction_removes_the_pod(server: Server) -> None:
    ns = server.namespace()
    server.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(_pod("bound")))
    code, _ = _bind(server, ns, "bound", server.nodes[0])
    assert code == 0
    assert server.json("get", "-n", ns, "pod", "bound")["spec"]["nodeName"] == server.nodes[0]
    again, said = _bind(server, ns, "bound", server.nodes[1])
    assert again != 0 and ("409" in said or "already" in said)
    server.kubectl("wait", "-n", ns, "pod/bound", "--for=jsonpath={.status.phase}=Running",
                   "--timeout=60s")  # fmt: skip
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "bound", "namespace": ns}}  # fmt: skip
    server.kubectl("create", "--raw", f"/api/v1/namespaces/{ns}/pods/bound/eviction", "-f", "-",
                   input=json.dumps(eviction))  # fmt: skip
    server.kubectl("wait", "-n", ns, "pod/bound", "--for=delete", "--timeout=60s")


def test_a_gated_pod_is_created_pod_scheduled_false_scheduling_gated(server: Server) -> None:
    ns = server.namespace()
    gated = _pod("held", schedulingGates=[{"name": "example.com/wait"}])
    server.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(gated))
    conditions = server.json("get", "-n", ns, "pod", "held")["status"]["conditions"]
    (scheduled,) = [c for c in conditions if c["type"] == "PodScheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulingGated")
    assert scheduled["message"] == "Scheduling is blocked due to non-empty scheduling gates"
    assert server.kubectl("get", "-n", ns, "pod", "held").stdout.split()[7] == "SchedulingGated"


def test_apply_of_a_list_with_validation(server: Server) -> None:
    """``kubectl apply -f`` of a ``kind: List`` (what ``kubectl get -o yaml`` writes): kubectl
    validates each item against the OpenAPI v2 document, then applies them one by one."""
    ns = server.namespace()
    queue = f"l-{ns}"
    items = [
        yaml.safe_load(_configmap("listed", a="1")),
        {"apiVersion": keys.API_VERSION, "kind": "Queue", "metadata": {"name": queue},
         "spec": {"weight": 2}},
        _pod("listed"),
    ]  # fmt: skip
    listed = {"apiVersion": "v1", "kind": "List", "items": items}
    applied = server.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(listed))
    assert applied.stdout.split("\n")[:3] == [
        "configmap/listed created",
        f"queue.scheduling.berth.io/{queue} created",
        "pod/listed created",
    ]
    assert server.json("get", "queue", queue)["spec"]["weight"] == 2
    # Client-side validation of the items: a Queue field of the wrong type is refused before
    # anything is sent, naming the field.
    items[1]["spec"] = {"weight": "heavy"}
    refused = server.kubectl(
        "apply", "-n", ns, "-f", "-", input=yaml.safe_dump(listed), check=False
    )
    assert refused.returncode != 0
    assert "spec.weight" in refused.stderr, refused.stderr
    assert server.json("get", "queue", queue)["spec"]["weight"] == 2
    server.kubectl("delete", "queue", queue)


def test_job_table_columns(server: Server) -> None:
    ns = server.namespace()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "counted"},
        "spec": {
            "suspend": True,  # no pod runs: the row stays what the columns say of a new job
            "completions": 3,
            "parallelism": 3,
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "busybox:1.37"}]}},
        },
    }  # fmt: skip
    server.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(job))
    header, row = server.kubectl("get", "-n", ns, "job", "counted", "-o", "wide").stdout.split(
        "\n"
    )[:2]
    assert header.split() == [
        "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR",
    ]  # fmt: skip
    cells = row.split()
    assert cells[0] == "counted"
    assert cells[2] == "0/3"
    assert cells[-3:-1] == ["main", "busybox:1.37"]
