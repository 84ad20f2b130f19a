"""One table of spec defaults, shared by the models and the snapshot's parsers (issue #31).

We test these aspects:

- a Queue, PodGroup or Reservation whose spec leaves every defaulted field out reads the same
  through the pydantic model (and so the rendered CRD, which the API server defaults from) as
  through the snapshot's parser, which fills in what an undefaulted object lacks;
- both take those values from :mod:`berth.api.spec_defaults`: changing the table changes both.
"""

from __future__ import annotations

import pytest

from berth.api import podgroups, queues, reservations, spec_defaults
from berth.scheduler.snapshot import podgroups as pg_snapshot
from berth.scheduler.snapshot import queues as q_snapshot
from berth.scheduler.snapshot import reservations as r_snapshot

_META = {"name": "x", "namespace": "team"}
_TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def _queue_pair() -> tuple[queues.QueueSpec, q_snapshot.QueueInfo]:
    model = queues.Queue.model_validate({"metadata": {"name": "x"}, "spec": {}})
    return model.spec, q_snapshot.queue_info({"metadata": {"name": "x"}, "spec": {}})


def test_an_empty_queue_spec_reads_alike_through_the_model_and_the_parser() -> None:
    spec, info = _queue_pair()
    assert (info.weight, info.priority, info.reclaimable) == (
        spec.weight,
        spec.priority,
        spec.reclaimable,
    )
    assert (info.state, info.job_order) == (spec.state.value, spec.job_order.value)
    assert info.preempt_across_queues == spec.preempt_across_queues


def test_an_empty_podgroup_spec_reads_alike_through_the_model_and_the_parser() -> None:
    raw = {"metadata": _META, "spec": {"subGroups": [{"name": "w", "selector": {}}]}}
    model = podgroups.PodGroup.model_validate(raw)
    info = pg_snapshot.pod_group_info(raw)
    assert info.min_member == model.spec.min_member
    assert info.queue == model.spec.queue
    assert info.fail_on_timeout is (
        model.spec.on_schedule_timeout is podgroups.ScheduleTimeoutPolicy.FAIL
    )
    assert model.spec.sub_groups is not None
    assert info.sub_groups[0].min_member == model.spec.sub_groups[0].min_member


def test_an_empty_reservation_spec_reads_alike_through_the_model_and_the_parser() -> None:
    raw = {
        "metadata": _META,
        "spec": {"template": _TEMPLATE, "owners": [{"object": {"name": "p"}}]},
    }
    model = reservations.Reservation.model_validate(raw)
    info = r_snapshot.reservation_info(raw)
    assert info.allocate_once == model.spec.allocate_once
    assert info.unschedulable == model.spec.unschedulable
    assert info.capacity_buffer == model.spec.capacity_buffer


def test_both_readers_take_their_defaults_from_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The models read the table when their classes are made; the parsers on every call.
    assert queues.QueueSpec.model_fields["weight"].default == spec_defaults.QUEUE_WEIGHT
    assert podgroups.PodGroupSpec.model_fields["min_member"].default == (
        spec_defaults.POD_GROUP_MIN_MEMBER
    )
    monkeypatch.setattr(spec_defaults, "QUEUE_WEIGHT", 7)
    monkeypatch.setattr(spec_defaults, "POD_GROUP_MIN_MEMBER", 3)
    info = q_snapshot.queue_info({"metadata": {"name": "x"}, "spec": {}})
    group = pg_snapshot.pod_group_info({"metadata": _META, "spec": {}})
    assert (info.weight, group.min_member) == (7, 3)
