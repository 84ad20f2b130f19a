"""The patches Berth sends, as typed records: JSON patch operations (RFC 6902).

Admission edits a pod's scheduling gates and affinity with JSON patches
(:mod:`berth.kube.transport.pod_edits`), the mutating webhook answers with one
(:mod:`berth.operator.webhooks`). Merge patches are the kinds' own records with only the
changed keys (a status patch is ``{"status": <the kind's status record>}``).
"""

from __future__ import annotations

import typing

import typing_extensions

__all__ = ["JsonPatchOperation"]

JsonPatchOperation = typing_extensions.TypedDict(
    "JsonPatchOperation",
    {
        "op": typing_extensions.Required[str],  # add, remove, replace, test, move, copy
        "path": typing_extensions.Required[str],  # a JSON pointer ("/spec/schedulingGates/0")
        "value": typing.Any,  # any JSON the path's field takes: a patch carries the API's types
        "from": str,
    },
    total=False,
)
