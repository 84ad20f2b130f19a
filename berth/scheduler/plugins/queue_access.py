"""QueueAccess: a queue takes work only from the namespaces its ``namespaceSelector`` admits.

A Queue's ``spec.namespaceSelector`` (a label selector over Namespaces) says which namespaces
may use it; a queue without one, and the implicit ``default`` queue, admit every namespace. The
admission webhook refuses a pod naming a queue its namespace may not use; this plugin keeps the
rule for everything that got in anyway (created before the queue changed, or while the webhook
was off): the session's ``job_valid`` refuses such a group, whatever the action, with the reason
``queue team-a does not admit namespace ml (namespaceSelector team=a)`` on the group and its
pods. A namespace Berth has not seen (yet) has no labels.
"""

from __future__ import annotations

from berth.scheduler.framework import (
    handles,
    interfaces,
    jobs,
    reasons,
    registries,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names

__all__ = ["NAME", "QueueAccess", "access_status", "new"]

NAME = names.QUEUE_ACCESS


def access_status(job: jobs.Job, /, *, session: sessions.Session) -> statuses.Status:
    """``UNSCHEDULABLE_AND_UNRESOLVABLE`` when the job's queue does not admit its namespace."""
    snapshot = session.snapshot
    queue = snapshot.queues.get(job.group.queue)
    if queue is None or queue.namespaces is None:
        return statuses.SUCCESS
    namespace = job.group.namespace
    if queue.namespaces.admits(snapshot.namespaces.get(namespace, {})):
        return statuses.SUCCESS
    return statuses.new(
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        f"queue {queue.name} does not admit namespace {namespace} "
        f"(namespaceSelector {queue.namespaces})",
        reason_code=reasons.ReasonCode.NAMESPACE_NOT_ADMITTED,
        details={"queue": queue.name, "namespace": namespace},
    )


class QueueAccess(interfaces.SessionPlugin):
    """Session plugin (job valid)."""

    name = NAME

    def on_session_open(self, session: sessions.Session) -> None:
        session.hooks.job_valid.add(lambda job: access_status(job, session=session), plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        """Nothing to drop: the callback lives and dies with the session."""


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> QueueAccess:
    """Build the plugin."""
    return QueueAccess()
