"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way kube-scheduler elects.

Several replicas of ``berth run`` campaign for one Lease; the holder schedules, the others wait
(docs/architecture.md). :class:`LeaderElector` follows client-go's ``leaderelection`` package:

- **Acquire** when the Lease does not exist, is free (``holderIdentity`` empty: the last
  leader released it), or has expired. A follower retries every ``retry_period`` (stretched by
  a random jitter so that followers do not call in lockstep).
- **Expiry is judged by observed time, not by the timestamps in the Lease**: a follower
  remembers, on its own event-loop clock, when it last saw the Lease *change*; the Lease has
  expired once ``leaseDurationSeconds`` pass without a change. Clocks of different machines are
  never compared, so a skewed clock cannot make two leaders. ``renewTime``/``acquireTime`` are
  written (from the wall clock) for people and tools only.
- **Renew** every ``retry_period`` while leading. If no renewal succeeds within
  ``renew_deadline`` of the last one, or the Lease shows another holder, leadership is
  **lost**: ``on_stopped_leading`` runs at once and :meth:`LeaderElector.run` raises
  :class:`~berth.operator.errors.LeadershipLost`, and the process exits non-zero, as
  kube-scheduler does. Because ``renew_deadline < lease_duration``, the old leader has stopped
  before any follower may take over.
- **Fencing**: with a :class:`~berth.kube.transport.fencing.Fence`, every successful acquire or
  renewal tells the fence when its calls were sent, and stepping down revokes the fence *before*
  ``on_stopped_leading`` runs, so no write for the leader leaves once leadership ends — and
  none leaves after the renew deadline even while this loop has not yet noticed (a paused
  process resuming: the writers may run before the elector does).
- **Optimistic concurrency**: every write replaces the version that was read; a 409 means
  somebody else wrote in between, so the Lease is read again and the decision made afresh.
- **Release** on a graceful stop: ``on_stopped_leading`` runs first, then the Lease is written
  free (empty holder, 1 s duration) so that a follower takes over at its next retry rather than
  after a whole lease duration.

Time is read only from the event loop (``loop.time()``, sleeps and timeouts), so tests run the
election under ``looptime`` in virtual seconds; the wall-clock timestamps written into the
Lease come from a :class:`~berth.util.clocks.Clock`.

Readiness: the ``leader-election`` condition is false while the API server cannot be reached
or refuses the Lease calls (expired credentials, RBAC), with the reason; true once a call
succeeds again. Who holds the Lease does not matter for readiness: followers are ready.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import enum
import logging
import math
import random

from berth.kube.transport import errors as kube_errors
from berth.kube.transport import fencing, leases
from berth.operator import errors, probing, settings
from berth.operator import metrics as berth_metrics
from berth.util import clocks, wakeups

__all__ = ["READINESS_CONDITION", "LeaderElector", "LeadershipCallback"]

logger = logging.getLogger(__name__)

READINESS_CONDITION = "leader-election"

LeadershipCallback = collections.abc.Callable[[], collections.abc.Awaitable[None]]
"""Called without arguments when this replica starts or stops leading."""

# client-go's JitterFactor: a follower waits between 1x and 2.2x the retry period.
DEFAULT_JITTER = 1.2
# Writing a 409'd Lease again after re-reading it: once is enough to absorb a harmless race
# (somebody touched a label); a second conflict in a row means a real contender.
_CONFLICT_RETRIES = 1


class _Verdict(enum.Enum):
    HELD = "held"  # this replica holds the Lease now (acquired or renewed)
    OTHER = "other"  # another replica holds an unexpired Lease
    FAILED = "failed"  # the API call failed: nothing is known


@dataclasses.dataclass(frozen=True)
class _Attempt:
    verdict: _Verdict
    detail: str = ""  # the other holder for OTHER, the error for FAILED


class LeaderElector:
    """Campaigns for one Lease and tells its callbacks when leadership starts and stops."""

    def __init__(
        self,
        config: settings.LeaderElectionSettings,
        *,
        leases_client: leases.LeaseClient,
        clock: clocks.Clock,
        readiness: probing.Readiness | None = None,
        metrics: berth_metrics.Metrics | None = None,
        jitter: float = DEFAULT_JITTER,
        rng: random.Random | None = None,
        fence: fencing.Fence | None = None,
    ) -> None:
        self._config = config
        self._fence = fence
        self._leases = leases_client
        self._clock = clock
        self._readiness = readiness
        self._metrics = metrics
        self._jitter = jitter
        self._rng = rng if rng is not None else random.Random()
        self._observed: leases.LeaseRecord | None = None
        self._observed_at = 0.0  # event-loop time when the Lease was last seen to change
        self._leading = False
        self._failing: str | None = None  # the last failure, logged once until it clears

    @property
    def identity(self) -> str:
        return self._config.identity

    @property
    def leading(self) -> bool:
        """True from acquiring the Lease until leadership is released or lost."""
        return self._leading

    @property
    def leader(self) -> str | None:
        """The holder of the Lease as last observed (None if never seen, or free)."""
        if self._observed is None:
            return None
        return self._observed.spec.holder_identity or None

    async def run(
        self,
        *,
        stop: asyncio.Event,
        on_started_leading: LeadershipCallback,
        on_stopped_leading: LeadershipCallback,
    ) -> None:
        """Campaign until ``stop`` is set; lead while the Lease is held.

        Returns after a graceful stop (leadership, if held, released). Raises
        :class:`~berth.operator.errors.LeadershipLost` when leadership was lost, after
        ``on_stopped_leading`` returned. If ``on_started_leading`` raises, leadership is
        released and the exception propagates.
        """
        self._set_readiness_unknown()
        logger.info(
            "campaigning for Lease %s as %s", self._leases.description, self._config.identity
        )
        if not await self._acquire(stop=stop):
            logger.info("stopped before acquiring Lease %s", self._leases.description)
            return
        self._set_leading(True)
        try:
            await on_started_leading()
            lost = await self._renew(stop=stop)
        except BaseException:
            await self._step_down(on_stopped_leading, release=True)
            raise
        if lost is None:
            await self._step_down(on_stopped_leading, release=True)
            return
        logger.error("leadership of Lease %s lost: %s", self._leases.description, lost)
        await self._step_down(on_stopped_leading, release=False)
        raise errors.LeadershipLost(f"leadership of Lease {self._leases.description} lost: {lost}")

    # Campaign and renewal ------------------------------------------------------------------
    async def _acquire(self, *, stop: asyncio.Event) -> bool:
        """Try until this replica holds the Lease (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            attempt = await self._attempt(timeout=self._config.renew_deadline)
            if attempt.verdict is _Verdict.HELD:
                return True
            pause = self._config.retry_period * (1 + self._jitter * self._rng.random())
            if await wakeups.sleep_or_stop(pause, stop=stop):
                break
        return False

    async def _renew(self, *, stop: asyncio.Event) -> str | None:
        """Renew until ``stop`` (None) or until leadership is lost (the reason)."""
        loop = asyncio.get_running_loop()
        last_renewal = loop.time()
        last_error = ""
        while True:
            if await wakeups.sleep_or_stop(self._config.retry_period, stop=stop):
                return None
            remaining = last_renewal + self._config.renew_deadline - loop.time()
            if remaining <= 0:
                return self._deadline_reason(last_error)
            attempt = await self._attempt(timeout=remaining)
            if attempt.verdict is _Verdict.HELD:
                last_renewal = loop.time()
                last_error = ""
            elif attempt.verdict is _Verdict.OTHER:
                return f"the Lease is now held by {attempt.detail}"
            else:
                last_error = attempt.detail
                if loop.time() >= last_renewal + self._config.renew_deadline:
                    return self._deadline_reason(last_error)

    def _deadline_reason(self, last_error: str) -> str:
        reason = f"no renewal succeeded within the renew deadline ({self._config.renew_deadline}s)"
        return f"{reason}: {last_error}" if last_error else reason

    async def _attempt(self, *, timeout: float) -> _Attempt:
        """One acquire-or-renew round, bounded by ``timeout`` seconds; never raises API errors."""
        sent = asyncio.get_running_loop().time()
        try:
            with fencing.unfenced():
                async with asyncio.timeout(timeout):
                    attempt = await self._try_acquire_or_renew()
        except TimeoutError:
            attempt = _Attempt(_Verdict.FAILED, f"the Lease calls took longer than {timeout:g}s")
        except kube_errors.KubeError as exc:
            attempt = _Attempt(_Verdict.FAILED, _explain(exc, self._leases))
        if attempt.verdict is _Verdict.HELD and self._fence is not None:
            # Measured from before the calls went out: the Lease is ours from some moment
            # after that, so the fence closes no later than a follower may take over.
            self._fence.renewed(sent)
        self._report(attempt)
        return attempt

    async def _try_acquire_or_renew(self) -> _Attempt:
        loop = asyncio.get_running_loop()
        for _ in range(1 + _CONFLICT_RETRIES):
            record = await self._leases.get()
            now = loop.time()
            if record is None:
                try:
                    created = await self._leases.create(self._spec_for(None))
                except kube_errors.Conflict:
                    continue  # another replica created it first: read theirs
                self._observe(created, now=loop.time())
                return _Attempt(_Verdict.HELD)
            self._observe(record, now=now)
            holder = record.spec.holder_identity
            if holder and holder != self._config.identity and not self._expired(record, now=now):
                return _Attempt(_Verdict.OTHER, holder)
            try:
                updated = await self._leases.update(record, self._spec_for(record))
            except kube_errors.Conflict:
                continue  # somebody wrote in between: read again and decide afresh
            self._observe(updated, now=loop.time())
            return _Attempt(_Verdict.HELD)
        return _Attempt(_Verdict.FAILED, "the Lease changed under every write (409 Conflict)")

    def _spec_for(self, current: leases.LeaseRecord | None) -> leases.LeaseSpec:
        """The spec that makes this replica the holder of ``current`` (None: a new Lease)."""
        now = self._clock.now()
        duration = math.ceil(self._config.lease_duration)
        if current is not None and current.spec.holder_identity == self._config.identity:
            return dataclasses.replace(
                current.spec, lease_duration_seconds=duration, renew_time=now
            )
        transitions = current.spec.lease_transitions + 1 if current is not None else 0
        return leases.LeaseSpec(
            holder_identity=self._config.identity,
            lease_duration_seconds=duration,
            acquire_time=now,
            renew_time=now,
            lease_transitions=transitions,
        )

    def _observe(self, record: leases.LeaseRecord, *, now: float) -> None:
        previous = self._observed
        if previous is None or previous.resource_version != record.resource_version:
            self._observed_at = now
        self._observed = record
        holder = record.spec.holder_identity
        if previous is None or previous.spec.holder_identity != holder:
            if holder:
                logger.info("Lease %s is held by %s", self._leases.description, holder)
            else:
                logger.info("Lease %s is free", self._leases.description)

    def _expired(self, record: leases.LeaseRecord, *, now: float) -> bool:
        duration = record.spec.lease_duration_seconds or self._config.lease_duration
        return now >= self._observed_at + duration

    # Stepping down -------------------------------------------------------------------------
    async def _step_down(self, on_stopped_leading: LeadershipCallback, *, release: bool) -> None:
        if self._fence is not None:
            self._fence.revoke()  # first: no write for the leader leaves from here on
        self._set_leading(False)
        try:
            await on_stopped_leading()
        finally:
            if release:
                await self._release()

    async def _release(self) -> None:
        """Write the Lease free so that a follower need not wait for it to expire."""
        record = self._observed
        if record is None or record.spec.holder_identity != self._config.identity:
            return
        now = self._clock.now()
        spec = leases.LeaseSpec(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            lease_transitions=record.spec.lease_transitions,
        )
        try:
            with fencing.unfenced():
                async with asyncio.timeout(self._config.renew_deadline):
                    self._observed = await self._leases.update(record, spec)
        except kube_errors.Conflict:
            # Somebody wrote since our last renewal: it is theirs now, nothing to release.
            logger.info(
                "Lease %s changed since it was renewed; not releasing it", self._leases.description
            )
        except (TimeoutError, kube_errors.KubeError) as exc:
            logger.warning(
                "could not release Lease %s: %s", self._leases.description, exc or "timeout"
            )
        else:
            logger.info("released Lease %s", self._leases.description)

    # Reporting -----------------------------------------------------------------------------
    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self._metrics is not None:
            self._metrics.set_leader(leading)
        if leading:
            logger.info("became the leader (Lease %s)", self._leases.description)
        else:
            logger.info("no longer the leader (Lease %s)", self._leases.description)

    def _set_readiness_unknown(self) -> None:
        if self._readiness is not None:
            self._readiness.set(
                READINESS_CONDITION, ready=False, reason="no Lease call has completed yet"
            )

    def _report(self, attempt: _Attempt) -> None:
        if attempt.verdict is _Verdict.FAILED:
            if attempt.detail != self._failing:
                logger.warning("Lease %s: %s", self._leases.description, attempt.detail)
            else:
                logger.debug("Lease %s: %s (again)", self._leases.description, attempt.detail)
            self._failing = attempt.detail
            if self._readiness is not None:
                self._readiness.set(READINESS_CONDITION, ready=False, reason=attempt.detail)
            return
        if self._failing is not None:
            logger.info("Lease %s: the API server answers again", self._leases.description)
        self._failing = None
        if self._readiness is not None:
            self._readiness.set(READINESS_CONDITION, ready=True)


def _explain(exc: kube_errors.KubeError, client: leases.LeaseClient) -> str:
    """A log line a cluster admin can act on."""
    if isinstance(exc, kube_errors.Unauthorized):
        return f"the API server rejected the credentials (expired or wrong?): {exc}"
    if isinstance(exc, kube_errors.Forbidden):
        return (
            f"RBAC forbids the Lease calls: grant get, create and update on "
            f"coordination.k8s.io leases in namespace {client.namespace}: {exc}"
        )
    if isinstance(exc, kube_errors.TransportError):
        return f"cannot reach the API server: {exc}"
    return str(exc)
