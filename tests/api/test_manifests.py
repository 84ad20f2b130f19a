"""``berth.api.manifests.load``: YAML text, files and folders -> models; errors users can act on.

We test these aspects:
- multi-document text loads in order, empty documents skipped, each kind to its model;
- a path (str or Path), a file or a folder, loads; folders in file-name order;
- unknown kinds, non-mapping documents, bad YAML and missing files raise ManifestError;
- a bad document's error names the source, the document index, kind and name, and every
  failing field path with its rule, never a traceback.
"""

from __future__ import annotations

import pathlib

import pytest

from berth.api import errors, manifests, podgroups, pods, queues, reservations

TEXT = """
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: team-a}
---
---
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {name: train}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: busybox}]
"""


def test_text_loads_every_document_in_order() -> None:
    loaded = manifests.load(TEXT)
    assert [type(m) for m in loaded] == [queues.Queue, podgroups.PodGroup, pods.Pod]
    assert loaded[1].metadata.name == "train"


def test_a_file_and_a_folder_load(tmp_path: pathlib.Path) -> None:
    (tmp_path / "b.yaml").write_text(TEXT)
    (tmp_path / "a.yml").write_text(
        "apiVersion: scheduling.berth.io/v1alpha1\nkind: Reservation\nmetadata: {name: r}\n"
        "spec:\n  template: {spec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}}\n"
        "  owners: [{object: {name: p}}]\n"
    )
    (tmp_path / "notes.txt").write_text("not a manifest")
    assert len(manifests.load(tmp_path / "b.yaml")) == 3
    assert len(manifests.load(str(tmp_path / "b.yaml"))) == 3
    kinds = [type(m) for m in manifests.load(tmp_path)]
    assert kinds == [reservations.Reservation, queues.Queue, podgroups.PodGroup, pods.Pod]


def test_a_bad_document_names_source_index_kind_name_and_paths(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(
        TEXT + "---\napiVersion: scheduling.berth.io/v1alpha1\nkind: Queue\nmetadata: {name: bad}\n"
        "spec: {weight: 0, state: Half}\n"
    )
    with pytest.raises(errors.ManifestError) as info:
        manifests.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: document 4 (Queue bad) is invalid:")
    assert "spec.weight: Input should be greater than or equal to 1" in message
    assert "spec.state: Input should be 'Open' or 'Closed'" in message
    assert [p for p, _ in info.value.problems] == ["spec.weight", "spec.state"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
            "unknown apiVersion/kind v1/Service",
        ),
        ("apiVersion: scheduling.berth.io/v1\nkind: Queue\n", "unknown apiVersion/kind"),
        ("kind: Queue\n", "unknown apiVersion/kind None/Queue"),
        ("- a\n- b\n", "must be a mapping, not list"),
        ("key: [unclosed\n", "not valid YAML"),
    ],
    ids=["unknown-kind", "unknown-version", "no-api-version", "not-a-mapping", "bad-yaml"],
)
def test_documents_that_are_not_manifests_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(errors.ManifestError, match="<text>") as info:
        manifests.load(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize("as_str", [False, True], ids=["path", "str"])
def test_a_missing_path_is_refused(tmp_path: pathlib.Path, as_str: bool) -> None:
    missing = tmp_path / "absent.yaml"
    with pytest.raises(errors.ManifestError, match="no such file"):
        manifests.load(str(missing) if as_str else missing)


def test_single_line_yaml_is_text() -> None:
    (queue,) = manifests.load(
        "{apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: q}}"
    )
    assert isinstance(queue, queues.Queue)


def test_pods_keep_fields_berth_does_not_model() -> None:
    document = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {
            "containers": [{"name": "c", "env": [{"name": "X", "value": "1"}]}],
            "restartPolicy": "Never",
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
        "status": {"phase": "Running"},
    }
    (pod,) = manifests.load_documents([document])
    assert pod.to_api() == document


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        ((), "(object)"),
        (("spec",), "spec"),
        (("spec", "owners", 0, "labelSelector"), "spec.owners[0].labelSelector"),
        (("status", "conditions", 2), "status.conditions[2]"),
    ],
    ids=["empty", "field", "nested", "trailing-index"],
)
def test_locations_read_as_field_paths(loc: tuple[int | str, ...], path: str) -> None:
    assert manifests.format_location(loc) == path
