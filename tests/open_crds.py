"""CustomResourceDefinitions with an open schema: another project's API, served for a test.

Tests that need a kind Berth reads but does not own (the autoscalers' ProvisioningRequest, a
Karpenter NodePool, Kubernetes' own scheduling kinds on a version that does not serve them)
install it as a CRD whose schema keeps every field (``x-kubernetes-preserve-unknown-fields``)
and which has a status subresource, as the real one does: the test writes what the other
project's controller would. Used against the emulator and the real control plane alike.
"""

from __future__ import annotations

import collections.abc
import typing

__all__ = ["crd"]


def crd(
    *,
    group: str,
    kind: str,
    plural: str,
    version: str,
    scope: str = "Namespaced",
    short_names: collections.abc.Sequence[str] = (),
    annotations: collections.abc.Mapping[str, str] | None = None,
) -> dict[str, typing.Any]:
    """The CRD serving ``kind`` at ``group/version`` with an open schema and a status
    subresource (``listKind`` left to the API server's default, ``<kind>List``)."""
    names: dict[str, typing.Any] = {"plural": plural, "singular": kind.lower(), "kind": kind}
    if short_names:
        names["shortNames"] = list(short_names)
    metadata: dict[str, typing.Any] = {"name": f"{plural}.{group}"}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": group,
            "scope": scope,
            "names": names,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
