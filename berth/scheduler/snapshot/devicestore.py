"""``DeviceStore``: the cache's store of DRA objects, one map per kind, and its snapshot view.

Owns the DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates the cache
has seen, parsed once per change, and which pods use claims (by key). It hands each snapshot a
frozen :class:`~berth.scheduler.snapshot.devices.Devices`, rebuilt only when something
changed; its :class:`~berth.scheduler.snapshot.devices.Catalog` (classes and slices) is rebuilt only
when a class or a slice changed, and the selector answers outlive it for the devices of every
slice that did not change: a claim allocated, a pod bound or a node's slice republished costs
no CEL evaluation of the other devices.

Claims a scheduler wrote (or is writing) are *assumed* (kube-scheduler's assume cache and
in-flight allocations): :meth:`DeviceStore.assume_claim` lays the allocation and the consumer
over the claim as last seen the moment the decision is made, so the next cycle counts the
devices taken although the write has not landed, and two claims are never given one device.
The overlay gives way to the API's word: when a newer version of the claim shows the
allocation and the consumers (or the write's own version, :meth:`DeviceStore.settle_claim`),
when the claim is replaced or deleted, when the write failed (:meth:`DeviceStore.forget_claim`)
and when the pod it was assumed for finishes or goes.

A Reservation's template claims are *held claims*
(:class:`~berth.scheduler.snapshot.reservations.HeldClaim`): no API object, they are set per
reserve pod (:meth:`DeviceStore.set_held_claims`) and appear in the view as claims whose spec
is their ResourceClaimTemplate's (or named claim's) and whose allocation is what the
Reservation holds, so the allocator counts those devices taken like any claim's.

Methods take the objects as the API returns them and report whether anything changed that
could let waiting work fit (the cache counts such a change as a change of the world). Pure and
synchronous; :class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import dataclasses
import types
import typing

from berth.scheduler.snapshot import (
    deviceclasses,
    devices,
    reservations,
    resourceclaims,
    resourceslices,
    wire,
)

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods

__all__ = ["DeviceStore"]


@dataclasses.dataclass
class _Assumed:
    """What was decided for one claim and has not shown in the API yet."""

    uid: str  # the claim's, as the decision saw it
    allocation: resourceclaims.AllocationInfo | None  # None: the claim had one already
    holder: str  # uid of the pod whose write makes the allocation
    consumers: dict[str, resourceclaims.ConsumerRef]  # pod uid -> reservedFor entry
    written: dict[str, str] = dataclasses.field(default_factory=dict)
    """Pod uid -> the resourceVersion its write produced, once it landed."""


def _version(text: str) -> int | None:
    """A resourceVersion as a number (etcd's revisions are; None when it is not one)."""
    return int(text) if text.isdigit() else None


def _caught_up(seen: str, written: str) -> bool:
    """Whether the version ``seen`` is ``written`` or newer."""
    if seen == written:
        return True
    a, b = _version(seen), _version(written)
    return a is not None and b is not None and a >= b


class DeviceStore:
    """DRA objects by kind; :meth:`view` gives a snapshot its frozen form."""

    def __init__(self, *, watched: bool = False) -> None:
        """``watched``: the cache's source feeds it DRA objects (see ``Devices.watched``)."""
        self._watched = watched
        self._classes: dict[str, deviceclasses.DeviceClassInfo] = {}
        self._slices: dict[str, resourceslices.SliceInfo] = {}
        self._claims: dict[str, resourceclaims.ResourceClaimInfo] = {}
        self._templates: dict[str, resourceclaims.ResourceClaimTemplateInfo] = {}
        self._claimants: set[str] = set()
        self._claimant_uids: dict[str, str] = {}  # pod key -> uid, of pods using claims
        self._assumed: dict[str, _Assumed] = {}  # claim key -> what was decided, not seen yet
        self._held: dict[str, tuple[reservations.HeldClaim, ...]] = {}  # reserve pod key ->
        self._selections: devices.Selections = {}  # kept across catalogs (see the module)
        self._catalog: devices.Catalog | None = devices.EMPTY_CATALOG
        self._view: devices.Devices | None = None

    def watch(self) -> bool:
        """From now on the cache's source feeds DRA objects (discovered at start); whether
        that is news."""
        if self._watched:
            return False
        self._watched = True
        self._view = None
        return True

    # DeviceClasses ------------------------------------------------------------------------
    def add_device_class(self, raw: typing.Any, /) -> bool:
        info = deviceclasses.device_class_info(raw)
        if self._classes.get(info.name) == info:
            return False
        self._classes[info.name] = info
        self._catalog_changed()
        return True

    def remove_device_class(self, obj: typing.Any, /) -> bool:
        if self._classes.pop(wire.name_of(obj), None) is None:
            return False
        self._catalog_changed()
        return True

    # ResourceSlices -----------------------------------------------------------------------
    def add_resource_slice(self, raw: typing.Any, /) -> bool:
        info = resourceslices.resource_slice_info(raw)
        self._forget(self._slices.get(info.name))
        self._slices[info.name] = info  # slices compare by identity: always a change
        self._catalog_changed()
        return True

    def remove_resource_slice(self, obj: typing.Any, /) -> bool:
        old = self._slices.pop(wire.name_of(obj), None)
        if old is None:
            return False
        self._forget(old)
        self._catalog_changed()
        return True

    def _forget(self, old: resourceslices.SliceInfo | None) -> None:
        """Drop the selector answers for a slice's devices (they are new objects now)."""
        for device in old.devices if old is not None else ():
            self._selections.pop(device, None)

    # ResourceClaims -----------------------------------------------------------------------
    def add_resource_claim(self, raw: typing.Any, /) -> bool:
        info = resourceclaims.resource_claim_info(raw)
        settled = self._settle(info)
        if self._claims.get(info.key) == info and not settled:
            return False
        self._claims[info.key] = info
        self._view = None
        return True

    def remove_resource_claim(self, obj: typing.Any, /) -> bool:
        key = wire.key_of(obj)
        dropped = self._assumed.pop(key, None) is not None
        if self._claims.pop(key, None) is None and not dropped:
            return False
        self._view = None
        return True

    def claim(self, key: str, /) -> resourceclaims.ResourceClaimInfo | None:
        """The claim ``namespace/name`` as last seen, with what is assumed of it."""
        return self._effective(key)

    def seen(self, key: str, /) -> resourceclaims.ResourceClaimInfo | None:
        """The claim ``namespace/name`` as the API last showed it (nothing assumed)."""
        return self._claims.get(key)

    # Assumed claims -----------------------------------------------------------------------
    def assume_claim(
        self,
        key: str,
        /,
        *,
        uid: str,
        pod: str,
        pod_uid: str,
        allocation: resourceclaims.AllocationInfo | None,
    ) -> bool:
        """Lay over the claim ``key`` the ``allocation`` (when given) and the pod ``pod``
        (its name; same namespace) among its consumers, until the API shows them; False
        when the claim as last seen is not the one decided on (``uid``)."""
        truth = self._claims.get(key)
        if truth is None or truth.uid != uid:
            return False
        found = self._assumed.get(key)
        if found is None or found.uid != uid:
            found = self._assumed[key] = _Assumed(uid=uid, allocation=None, holder="", consumers={})
        if allocation is not None and truth.allocation is None and found.allocation is None:
            found.allocation, found.holder = allocation, pod_uid
        found.consumers[pod_uid] = resourceclaims.ConsumerRef(
            resource="pods", name=pod, uid=pod_uid
        )
        self._view = None
        return True

    def settle_claim(self, key: str, /, *, pod_uid: str, version: str) -> None:
        """The write of the assumed claim ``key`` for the pod ``pod_uid`` landed as
        ``version``: what it assumed goes once the API shows that version (or a newer one)."""
        found = self._assumed.get(key)
        if found is not None and pod_uid in found.consumers:
            found.written[pod_uid] = version
            truth = self._claims.get(key)
            if truth is not None and self._settle(truth):
                self._view = None

    def forget_claim(self, key: str, /, *, pod_uid: str) -> bool:
        """Undo what was assumed of the claim ``key`` for the pod ``pod_uid`` (its write
        failed, or it is released): its consumer entry, and the allocation if its write was
        to make it; whether anything changed."""
        found = self._assumed.get(key)
        if found is None or pod_uid not in found.consumers:
            return False
        del found.consumers[pod_uid]
        found.written.pop(pod_uid, None)
        if found.holder == pod_uid:
            found.allocation, found.holder = None, ""
        if not found.consumers:
            del self._assumed[key]
        self._view = None
        return True

    def _settle(self, truth: resourceclaims.ResourceClaimInfo) -> bool:
        """Drop what the API now shows of the overlay of ``truth``'s claim; whether the
        overlay changed."""
        found = self._assumed.get(truth.key)
        if found is None:
            return False
        if truth.uid != found.uid or truth.deleting:
            del self._assumed[truth.key]
            return True
        changed = False

        def seen(uid: str) -> bool:
            written = found.written.get(uid)
            return written is not None and _caught_up(truth.resource_version, written)

        if found.allocation is not None and (truth.allocation is not None or seen(found.holder)):
            found.allocation, found.holder, changed = None, "", True  # the API's word now
        shown = {ref.uid for ref in truth.reserved_for}
        for uid in [u for u in found.consumers if u in shown or seen(u)]:
            del found.consumers[uid]
            found.written.pop(uid, None)
            changed = True
        if not found.consumers and found.allocation is None:
            del self._assumed[truth.key]
            changed = True
        return changed

    def _effective(self, key: str) -> resourceclaims.ResourceClaimInfo | None:
        truth = self._claims.get(key)
        found = self._assumed.get(key)
        if truth is None or found is None:
            return truth
        shown = {ref.uid for ref in truth.reserved_for}
        extra = tuple(ref for uid, ref in found.consumers.items() if uid not in shown)
        allocation = truth.allocation if truth.allocation is not None else found.allocation
        if allocation is None:
            return truth  # reserved for a pod without an allocation: not a claim's state
        return dataclasses.replace(
            truth, allocation=allocation, reserved_for=(*truth.reserved_for, *extra)
        )

    # ResourceClaimTemplates ---------------------------------------------------------------
    def add_resource_claim_template(self, raw: typing.Any, /) -> bool:
        info = resourceclaims.resource_claim_template_info(raw)
        if self._templates.get(info.key) == info:
            return False
        self._templates[info.key] = info
        self._view = None
        return True

    def remove_resource_claim_template(self, obj: typing.Any, /) -> bool:
        if self._templates.pop(wire.key_of(obj), None) is None:
            return False
        self._view = None
        return True

    # Pods ---------------------------------------------------------------------------------
    def pod_changed(self, key: str, info: pods.PodInfo | None, /) -> None:
        """``key`` is now ``info`` (``None``: gone): the store tracks which pods use claims,
        and drops what was assumed for a pod that finished or went."""
        uses = info is not None and bool(info.resource_claims)
        before = self._claimant_uids.get(key)
        if before is not None and (info is None or info.terminal or info.uid != before):
            self._release_assumed(before)
        if uses and info is not None and not info.terminal:
            self._claimant_uids[key] = info.uid
        else:
            self._claimant_uids.pop(key, None)
        if uses == (key in self._claimants):
            return  # the view holds keys only: the snapshot's pods say the rest
        if uses:
            self._claimants.add(key)
        else:
            self._claimants.discard(key)
        self._view = None

    def forget_pod_claims(self, key: str, /) -> bool:
        """Undo everything assumed for the pod ``key`` (its claims' writes will not happen);
        whether anything was assumed."""
        uid = self._claimant_uids.get(key)
        return uid is not None and self._release_assumed(uid)

    def _release_assumed(self, pod_uid: str) -> bool:
        held = [k for k, found in self._assumed.items() if pod_uid in found.consumers]
        for key in held:
            self.forget_claim(key, pod_uid=pod_uid)
        return bool(held)

    # Held claims --------------------------------------------------------------------------
    def set_held_claims(self, pod_key: str, claims: tuple[reservations.HeldClaim, ...], /) -> bool:
        """The reserve pod ``pod_key`` now holds ``claims`` (empty: none); whether that is a
        change."""
        if self._held.get(pod_key, ()) == claims:
            return False
        if claims:
            self._held[pod_key] = claims
        else:
            del self._held[pod_key]
        self._view = None
        return True

    def _held_claim(self, held: reservations.HeldClaim) -> resourceclaims.ResourceClaimInfo:
        """A held claim as the allocator reads a claim (its spec from the object it copies)."""
        namespace, _, name = held.key.partition("/")
        spec = resourceclaims.ClaimSpec()
        problem: str | None = None
        if held.template is not None:
            template = self._templates.get(held.template)
            if template is None:
                problem = (
                    f"{held.field}.resourceClaimTemplateName: resourceclaimtemplate "
                    f"{held.template} not found"
                )
            else:
                spec = template.spec
        elif held.claim is not None:
            copied = self._claims.get(held.claim)
            if copied is None:
                problem = f"{held.field}.resourceClaimName: resourceclaim {held.claim} not found"
            else:
                spec = copied.spec
        if problem is None and spec.problem is not None:
            source = held.template or held.claim
            kind = "resourceclaimtemplate" if held.template is not None else "resourceclaim"
            problem = f"{held.field} ({kind} {source}): {spec.problem}"
        return resourceclaims.ResourceClaimInfo(
            key=held.key,
            namespace=namespace,
            name=name,
            uid=held.reservation_uid,
            spec=spec,
            allocation=resourceclaims.AllocationInfo(devices=held.devices, node_selector=None)
            if held.devices is not None
            else None,
            controller=(reservations.HELD_CLAIM_KIND, held.reservation, held.reservation_uid),
            problem=problem,
        )

    # Views --------------------------------------------------------------------------------
    def _catalog_changed(self) -> None:
        self._catalog = None
        self._view = None

    def _claims_view(self) -> dict[str, resourceclaims.ResourceClaimInfo]:
        claims = dict(self._claims)
        for key in self._assumed:
            found = self._effective(key)
            if found is not None:
                claims[key] = found
        for held in self._held.values():
            for claim in held:
                claims[claim.key] = self._held_claim(claim)
        return claims

    def view(self) -> devices.Devices:
        """The snapshot's frozen view (the same object while nothing changed)."""
        if self._view is None:
            if self._catalog is None:
                self._catalog = devices.Catalog(
                    classes=types.MappingProxyType(dict(sorted(self._classes.items()))),
                    slices=types.MappingProxyType(dict(sorted(self._slices.items()))),
                    selections=self._selections,
                )
            self._view = devices.Devices(
                catalog=self._catalog,
                claims=types.MappingProxyType(self._claims_view()),
                templates=types.MappingProxyType(dict(self._templates)),
                claimants=tuple(sorted(self._claimants)),
                watched=self._watched,
            )
        return self._view
