"""Waiting for a pod's PersistentVolumeClaims to be bound before the pod is bound.

kube-scheduler's VolumeBinding PreBind: a pod whose claim was unbound when it was placed (a
``WaitForFirstConsumer`` claim, annotated with the chosen node in the same cycle) must not reach
the kubelet before the provisioner or kube-controller-manager's PV binder has bound the claim.
The binder (:class:`~berth.kube.binder.decisions.ApiSink`) holds such a binding, the pod assumed on
its node, in one :class:`ClaimWaits`, which the claim informer wakes
(:meth:`ClaimWaits.changed`) on every change of a claim. Nothing is polled; each wait is bounded
by ``claim_wait`` (kube-scheduler's ``bindTimeoutSeconds``), and ends at once when the volume
chosen for one of its claims could not be reserved (:meth:`ClaimWaits.refuse`: the volume
changed since it was chosen, e.g. another claim has it): the pod is then tried again, as
kube-scheduler's PreBind fails the pod when its volume update fails. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import collections.abc
import typing

from berth.util import wakeups

__all__ = ["ClaimWaits", "Refused", "waiting_message"]

_MAX_REFUSED = 4096


def waiting_message(node: str, claims: collections.abc.Iterable[str], /) -> str:
    """What the pod's Event says while its binding waits for ``claims``."""
    return (
        f"binding to {node} waits for PersistentVolumeClaims {', '.join(claims)} to be bound"
        " (provisioned or bound to a volume on that node)"
    )


class Refused(typing.NamedTuple):
    """A wait ended because the volume chosen for ``claim`` could not be reserved."""

    claim: str
    why: str


class ClaimWaits:
    """Bindings waiting for their claims; see the module docstring."""

    def __init__(self, bound: collections.abc.Callable[[str], bool], *, timeout: float) -> None:
        self._bound = bound
        self.timeout = timeout
        """Seconds a binding waits at most (``claim_wait``)."""
        self._wakeups: wakeups.Wakeups[str] = wakeups.Wakeups()  # claim and pod keys -> waits
        # Claims whose chosen volume could not be reserved -> why; until chosen for again.
        self._refused: dict[str, str] = {}

    def choosing(self, claim: str) -> None:
        """A volume is being reserved for ``claim`` (again): an earlier refusal is over."""
        self._refused.pop(claim, None)

    def refuse(self, claim: str, why: str) -> None:
        """The volume chosen for ``claim`` could not be reserved: the bindings waiting for it
        give up now (the scheduler chooses again)."""
        self._refused.pop(claim, None)
        self._refused[claim] = why
        while len(self._refused) > _MAX_REFUSED:  # claims deleted since: bounded all the same
            del self._refused[next(iter(self._refused))]
        self.changed(claim)

    def unbound(self, claims: collections.abc.Iterable[str]) -> tuple[str, ...]:
        """The claims (``namespace/name``) not bound yet."""
        return tuple(key for key in claims if not self._bound(key))

    def changed(self, key: str) -> None:
        """A claim changed or went, or a pod left: wake the waits watching ``key``."""
        self._wakeups.wake(key)

    async def wait(
        self,
        pod: str,
        claims: collections.abc.Collection[str],
        *,
        abandoned: collections.abc.Callable[[], bool],
    ) -> tuple[str, ...] | Refused | None:
        """Wait until every one of ``claims`` is bound (``()``), ``abandoned()`` holds (``None``,
        checked whenever ``pod`` leaves), the volume chosen for one of them is refused
        (:class:`Refused`) or :attr:`timeout` passes (the claims still unbound)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        with self._wakeups.watching([pod, *claims]) as wake:
            while True:
                wake.clear()
                if abandoned():
                    return None
                left = self.unbound(claims)
                refused = next((c for c in left if c in self._refused), None)
                if refused is not None:
                    return Refused(refused, self._refused[refused])
                if not left or deadline - loop.time() <= 0:
                    return left
                await wake.sleep(timeout=deadline - loop.time())
