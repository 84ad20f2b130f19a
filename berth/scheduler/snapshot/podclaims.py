"""A pod's ResourceClaims (``spec.resourceClaims``), resolved to the claims they name.

Each entry names a claim directly (``resourceClaimName``, shareable between pods) or a
ResourceClaimTemplate (``resourceClaimTemplateName``), from which the resourceclaim controller
makes the pod its own claim and records its name in ``status.resourceClaimStatuses``
(Kubernetes' ``resourceclaim.Name``): until it has, the claim is not there yet; an entry
there without a name means the controller intentionally made none, and the pod needs none.

:func:`parse` never raises: a malformed entry is a problem naming the field (the pod can never
be placed as written).
"""

from __future__ import annotations

import dataclasses

from berth.api import core
from berth.scheduler.snapshot import ids

__all__ = ["PodResourceClaim", "parse"]


@dataclasses.dataclass(frozen=True)
class PodResourceClaim:
    """One ``spec.resourceClaims[i]`` entry, resolved."""

    name: str  # the entry's name (what containers refer to)
    field: str  # "spec.resourceClaims[0]", for reasons
    claim: str | None  # the claim's name in the pod's namespace; None: not made (yet)
    template: str | None = None  # resourceClaimTemplateName
    skipped: bool = False  # from a template, and the controller made no claim on purpose

    @property
    def from_template(self) -> bool:
        return self.template is not None

    def key(self, namespace: str, /) -> str | None:
        """``namespace/name`` of the claim, ``None`` while it is not made."""
        return ids.key_of(namespace, name=self.claim) if self.claim else None


def _statuses(status: core.PodStatus) -> dict[str, str | None]:
    raw = status.get("resourceClaimStatuses")
    out: dict[str, str | None] = {}
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            made = item.get("resourceClaimName")
            out[str(item["name"])] = str(made) if made else None
    return out


def parse(
    spec: core.PodSpec, status: core.PodStatus, /
) -> tuple[tuple[PodResourceClaim, ...], tuple[str, ...]]:
    """The pod's claims and the problems of malformed entries (each naming its field)."""
    raw = spec.get("resourceClaims")
    if not raw:
        return (), ()
    if not isinstance(raw, list):
        return (), ("invalid spec.resourceClaims: not a list",)
    made = _statuses(status)
    claims: list[PodResourceClaim] = []
    problems: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        field = f"spec.resourceClaims[{i}]"
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            problems.append(f"invalid {field}.name: an entry needs a name")
            continue
        if name in seen:
            problems.append(f"invalid {field}.name: {name} is used twice")
            continue
        seen.add(name)
        by_name = item.get("resourceClaimName")
        template = item.get("resourceClaimTemplateName")
        if bool(by_name) == bool(template):
            problems.append(
                f"invalid {field}: exactly one of resourceClaimName and "
                "resourceClaimTemplateName must be set"
            )
            continue
        if by_name:
            claims.append(PodResourceClaim(name=name, field=field, claim=str(by_name)))
            continue
        claims.append(
            PodResourceClaim(
                name=name,
                field=field,
                claim=made.get(name),
                template=str(template),
                skipped=name in made and made[name] is None,
            )
        )
    return tuple(claims), tuple(problems)
