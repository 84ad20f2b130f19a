"""Result codes and statuses of the extension points.

Every per-pod extension point returns a :class:`Status`; plugins never return ``None`` for
success (use :data:`SUCCESS`) and never raise for an expected outcome. The runtime
(:mod:`berth.scheduler.framework.runtime`) turns an exception that escapes a plugin into an
``ERROR`` status with :meth:`Status.from_exception` and logs it as a bug.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum

from berth.scheduler.framework import reasons as reasons_

__all__ = ["SKIP", "SUCCESS", "Code", "Status", "new", "rejecting"]


class Code(enum.Enum):
    """What an extension point decided; each member says what the runtime does with it."""

    SUCCESS = "Success"
    """The point passed: the runtime goes on to the next plugin and the next point."""

    ERROR = "Error"
    """A bug or an internal failure: the pod is not placed this cycle, the plugin's first
    error is logged once per window (not per cycle), and the rest of the cycle goes on."""

    UNSCHEDULABLE = "Unschedulable"
    """The pod does not fit now: it stays pending with the reasons; evicting others
    (reclaim, preempt) may help, so those actions still consider it."""

    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    """The pod cannot fit and evicting others would not help (wrong labels, taints, a
    resource no node has): it stays pending and the evicting actions skip it."""

    WAIT = "Wait"
    """Permit only: the pod's placement is held until its group is ready (a gang waiting for
    quorum); if the group never becomes ready in this session, the placement is undone."""

    SKIP = "Skip"
    """PreFilter/PreScore: this plugin's Filter/Score has nothing to do for this pod and is
    not called. Bind: this binder does not handle the pod; the next binder is asked."""

    PENDING = "Pending"
    """PreEnqueue: the pod is not ready to be tried (gated, its group incomplete); it is not
    attempted this session and keeps the reason. It is not an error."""


_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Status:
    """An extension point's answer: a code, human-readable reasons, and who said it.

    ``reason_code`` says what kind of obstacle a rejection is (None: plain ``Unschedulable``,
    or ``Error`` for ``ERROR``) and ``details`` carries its typed facts; :meth:`reason` is the
    record sessions and conditions carry (see :mod:`berth.scheduler.framework.reasons`).
    """

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""  # set by the runtime (with_plugin) when a plugin rejects
    reason_code: reasons_.ReasonCode | None = None
    details: collections.abc.Mapping[str, reasons_.Detail] = dataclasses.field(
        default_factory=dict, hash=False
    )

    def is_success(self) -> bool:
        """True for ``SUCCESS`` only (``SKIP`` is not success: callers treat it explicitly)."""
        return self.code is Code.SUCCESS

    def is_rejected(self) -> bool:
        """True when the pod cannot go on for scheduling reasons (not an error)."""
        return self.code in _REJECTED

    def is_error(self) -> bool:
        """True for ``ERROR``."""
        return self.code is Code.ERROR

    def is_skip(self) -> bool:
        """True for ``SKIP``."""
        return self.code is Code.SKIP

    def is_wait(self) -> bool:
        """True for ``WAIT``."""
        return self.code is Code.WAIT

    def with_plugin(self, plugin: str) -> Status:
        """The same status, attributed to ``plugin`` (kept if already attributed)."""
        if self.plugin:
            return self
        return dataclasses.replace(self, plugin=plugin)

    def message(self) -> str:
        """The reasons joined for a user: ``"a; b"`` (the code's name when there are none)."""
        return "; ".join(self.reasons) if self.reasons else self.code.value

    def reason(self) -> reasons_.Reason:
        """Why the pod waits, as the record sessions carry: :meth:`message` with the code."""
        code = self.reason_code
        if code is None:
            code = (
                reasons_.ReasonCode.ERROR if self.is_error() else reasons_.ReasonCode.UNSCHEDULABLE
            )
        return reasons_.Reason(
            code=code, message=self.message(), plugin=self.plugin, details=self.details
        )

    @classmethod
    def from_exception(cls, exc: BaseException, *, plugin: str = "") -> Status:
        """An ``ERROR`` status describing ``exc`` (how the runtime reports a plugin's bug).

        The reason names the plugin when given: ``plugin Fit raised KeyError: 'cpu'``.
        """
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if plugin:
            text = f"plugin {plugin} raised {text}"
        return cls(code=Code.ERROR, reasons=(text,), plugin=plugin)


def new(
    code: Code,
    *reasons: str,
    plugin: str = "",
    reason_code: reasons_.ReasonCode | None = None,
    details: collections.abc.Mapping[str, reasons_.Detail] | None = None,
) -> Status:
    """A status with ``code`` and ``reasons``: ``statuses.new(Code.UNSCHEDULABLE, "why")``;
    ``reason_code`` and ``details`` make :meth:`Status.reason` a typed reason."""
    return Status(
        code=code,
        reasons=reasons,
        plugin=plugin,
        reason_code=reason_code,
        details=dict(details) if details else {},
    )


def rejecting(code: Code, reason: reasons_.Reason) -> Status:
    """A status rejecting with ``code`` for ``reason`` (its code, details and plugin kept), for
    plugins that build their reasons as records."""
    return new(
        code,
        reason.message,
        plugin=reason.plugin,
        reason_code=reason.code,
        details=reason.details,
    )


SUCCESS = Status()
"""The one success value; plugins return it instead of ``None``."""

SKIP = Status(code=Code.SKIP)
"""A plain ``SKIP``."""
