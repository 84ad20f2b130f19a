"""CustomResourceDefinitions (``apiextensions.k8s.io/v1``): typed records.

The CRD as the API server takes and serves it, spelt as it does (camelCase keys): its names,
scope and versions, each version's ``openAPIV3Schema``
(:data:`~berth.api.schemas.JSONSchemaProps`), subresources and printer columns, and the status
the API server gives it. Berth renders its own
three (:mod:`berth.api.crds`), evaluates their rules (:mod:`berth.api.cel`), and the emulator
registers the kinds of any CRD posted to it. See :mod:`berth.api.objects` for what
``total=False`` promises.
"""

from __future__ import annotations

import typing_extensions

from berth.api import objects, schemas

__all__ = [
    "API_VERSION",
    "CustomResourceColumnDefinition",
    "CustomResourceConversion",
    "CustomResourceDefinition",
    "CustomResourceDefinitionNames",
    "CustomResourceDefinitionSpec",
    "CustomResourceDefinitionStatus",
    "CustomResourceDefinitionVersion",
    "CustomResourceSubresourceScale",
    "CustomResourceSubresourceStatus",
    "CustomResourceSubresources",
    "CustomResourceValidation",
    "SelectableField",
]

API_VERSION = "apiextensions.k8s.io/v1"


class CustomResourceDefinitionNames(typing_extensions.TypedDict, total=False):
    plural: str
    singular: str
    shortNames: list[str]
    kind: str
    listKind: str
    categories: list[str]


class CustomResourceValidation(typing_extensions.TypedDict, total=False):
    openAPIV3Schema: schemas.JSONSchemaProps


class CustomResourceSubresourceStatus(typing_extensions.TypedDict):
    """Empty: its presence enables ``/status``."""


class CustomResourceSubresourceScale(typing_extensions.TypedDict, total=False):
    specReplicasPath: str
    statusReplicasPath: str
    labelSelectorPath: str


class CustomResourceSubresources(typing_extensions.TypedDict, total=False):
    status: CustomResourceSubresourceStatus
    scale: CustomResourceSubresourceScale


class CustomResourceColumnDefinition(typing_extensions.TypedDict, total=False):
    """One ``additionalPrinterColumns`` entry: what ``kubectl get`` shows."""

    name: str
    type: str  # string, integer, number, boolean or date
    format: str
    description: str
    priority: int
    jsonPath: str


class SelectableField(typing_extensions.TypedDict):
    jsonPath: str


class CustomResourceDefinitionVersion(typing_extensions.TypedDict, total=False):
    name: str
    served: bool
    storage: bool
    deprecated: bool
    deprecationWarning: str
    schema: CustomResourceValidation
    subresources: CustomResourceSubresources
    additionalPrinterColumns: list[CustomResourceColumnDefinition]
    selectableFields: list[SelectableField]


class CustomResourceConversion(typing_extensions.TypedDict, total=False):
    strategy: str  # None or Webhook (Berth's CRDs have one version: None)


class CustomResourceDefinitionSpec(typing_extensions.TypedDict, total=False):
    group: str
    names: CustomResourceDefinitionNames
    scope: str  # Namespaced or Cluster
    versions: list[CustomResourceDefinitionVersion]
    conversion: CustomResourceConversion
    preserveUnknownFields: bool


class CustomResourceDefinitionStatus(typing_extensions.TypedDict, total=False):
    conditions: list[objects.Condition]  # NamesAccepted, Established, ...
    acceptedNames: CustomResourceDefinitionNames
    storedVersions: list[str]


class CustomResourceDefinition(objects.KubeObject, total=False):
    spec: CustomResourceDefinitionSpec
    status: CustomResourceDefinitionStatus
