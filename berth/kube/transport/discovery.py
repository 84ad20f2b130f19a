"""What the API server serves, asked through discovery (``GET /apis/<group>/<version>``).

Kopf looks the resources it handles up once, when it starts (Berth turns its scanning off:
:mod:`berth.controllers.registry`), so whoever starts a Kopf operator asks first whether Berth's
kinds are served: the leader waits for them (:mod:`berth.controllers.indexing`), the admission
webhooks decide whether Kopf must watch for them to appear (:mod:`berth.operator.webhooks`).
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.kube.transport import clients, errors, rest

__all__ = ["Served", "served"]


@dataclasses.dataclass(frozen=True)
class Served:
    """Discovery's answer about some resources of one group and version."""

    missing: tuple[str, ...]  # the resources asked about that are not served
    problem: str | None = None  # why discovery could not be asked (then all count as missing)

    @property
    def all(self) -> bool:
        return not self.missing and self.problem is None


async def served(
    api: clients.AsyncApiClient,
    *,
    api_version: str,
    plurals: collections.abc.Sequence[str],
    timeout: float = 10.0,
) -> Served:
    """Which of ``plurals`` the API server serves in ``api_version`` (``group/version``)."""
    path = f"/apis/{api_version}"
    try:
        found = await rest.request(api, method="GET", path=path, timeout=timeout)
    except errors.NotFound:
        return Served(tuple(plurals))
    except errors.KubeError as exc:
        return Served(
            tuple(plurals), problem=f"cannot ask the API server what {path} serves: {exc}"
        )
    listed = found.get("resources")
    names = (
        {r.get("name") for r in listed if isinstance(r, dict)}
        if isinstance(listed, list)
        else set()
    )
    return Served(tuple(p for p in plurals if p not in names))
