"""Fixtures for the emulator's own tests: real clients bound to the per-test emulator.

- ``client``: a synchronous ``kubernetes`` ApiClient for ``emulator``;
- ``aclient``: a ``kubernetes_asyncio`` ApiClient for ``emulator`` (closed after the test);
- ``test_crd``: a small namespaced CRD (``widgets.test.berth.io``) with a status subresource,
  defaults, an enum, a CEL rule with a quantity, and printer columns incl. a condition filter.

The ``emulator``, ``module_emulator`` and ``kubectl`` fixtures come from
:mod:`berth.emulator.testing` (enabled in ``tests/conftest.py``).
"""

from __future__ import annotations

import copy
import typing
from collections.abc import AsyncIterator, Iterator

import kubernetes
import kubernetes_asyncio
import pytest

from berth.emulator import testing

WIDGET_CRD: dict[str, typing.Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.berth.io"},
    "spec": {
        "group": "test.berth.io",
        "scope": "Namespaced",
        "names": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "shortNames": ["wdg"],
            "categories": ["berthtest"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                    {
                        "name": "Ready",
                        "type": "string",
                        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                    },
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "description": "A Widget is a test object.",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "description": "What the widget should be.",
                                "required": ["size"],
                                "x-kubernetes-validations": [
                                    {
                                        "rule": "!has(self.limit) || "
                                        "quantity(self.limit).isGreaterThan(quantity('100m'))",
                                        "message": "limit must be more than 100m",
                                    }
                                ],
                                "properties": {
                                    "size": {
                                        "type": "integer",
                                        "minimum": 1,
                                        "maximum": 10,
                                        "description": "How big the widget is.",
                                    },
                                    "color": {
                                        "type": "string",
                                        "enum": ["red", "blue"],
                                        "default": "red",
                                    },
                                    "limit": {"x-kubernetes-int-or-string": True},
                                    "tags": {
                                        "type": "array",
                                        "items": {"type": "string"},
                                        "x-kubernetes-list-type": "set",
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "phase": {"type": "string"},
                                    "conditions": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True,
                                        },
                                    },
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture
def test_crd() -> dict[str, typing.Any]:
    return copy.deepcopy(WIDGET_CRD)


@pytest.fixture
def client(emulator: testing.RunningEmulator) -> Iterator[kubernetes.client.ApiClient]:
    api_client = kubernetes.config.new_client_from_config(config_file=str(emulator.kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
async def aclient(
    emulator: testing.RunningEmulator,
) -> AsyncIterator[kubernetes_asyncio.client.ApiClient]:
    api_client = await kubernetes_asyncio.config.new_client_from_config(
        config_file=str(emulator.kubeconfig)
    )
    try:
        yield api_client
    finally:
        await api_client.close()
