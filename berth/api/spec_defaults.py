"""One table of the defaults of Berth's kinds' specs (Queue, PodGroup, Reservation).

The pydantic models take their field defaults from here (:mod:`berth.api.queues`,
:mod:`~berth.api.podgroups`, :mod:`~berth.api.reservations`), and so do the CRDs rendered from
them, whose defaults the API server fills in. The snapshot's parsers
(:mod:`berth.scheduler.snapshot.queues`, ...) read the same names for a field an object lacks:
an object stored before its CRD had the default, or one the simulator keeps undefaulted. One
table, so that a default changed here changes for both readers at once.
"""

from __future__ import annotations

import typing

from berth.api import keys

__all__ = [
    "POD_GROUP_MIN_MEMBER",
    "POD_GROUP_ON_SCHEDULE_TIMEOUT",
    "POD_GROUP_QUEUE",
    "QUEUE_JOB_ORDER",
    "QUEUE_PREEMPT_ACROSS_QUEUES",
    "QUEUE_PRIORITY",
    "QUEUE_RECLAIMABLE",
    "QUEUE_STATE",
    "QUEUE_WEIGHT",
    "RESERVATION_ALLOCATE_ONCE",
    "RESERVATION_CAPACITY_BUFFER",
    "RESERVATION_UNSCHEDULABLE",
    "SUB_GROUP_MIN_MEMBER",
]

# Queue.spec
QUEUE_WEIGHT: typing.Final = 1
QUEUE_PRIORITY: typing.Final = 0
QUEUE_RECLAIMABLE: typing.Final = True
QUEUE_STATE: typing.Final = "Open"
QUEUE_JOB_ORDER: typing.Final = "PriorityFIFO"
QUEUE_PREEMPT_ACROSS_QUEUES: typing.Final = False

# PodGroup.spec
POD_GROUP_MIN_MEMBER: typing.Final = 1
POD_GROUP_QUEUE: typing.Final = keys.DEFAULT_QUEUE
POD_GROUP_ON_SCHEDULE_TIMEOUT: typing.Final = "Requeue"
SUB_GROUP_MIN_MEMBER: typing.Final = 1

# Reservation.spec
RESERVATION_ALLOCATE_ONCE: typing.Final = True
RESERVATION_UNSCHEDULABLE: typing.Final = False
RESERVATION_CAPACITY_BUFFER: typing.Final = False
