"""What the snapshot reads of a Queue's ``spec.autoscaling`` and a Reservation's
``spec.capacityBuffer``.

We test these aspects:
- a queue's ProvisioningRequest class and parameters, and ``reservationBuffers``, are parsed;
  unset, a queue asks for nothing;
- a class that is not a DNS subdomain, or parameters over the API's bounds (what the CRD's
  rules refuse, should one get through), make that queue invalid, naming the field;
- a Reservation's ``capacityBuffer`` is parsed (off unless ``true``).
"""

from __future__ import annotations

import typing

from berth.api import autoscaling
from berth.scheduler.snapshot import queues, reservations

Object = dict[str, typing.Any]


def _queue(spec: Object) -> Object:
    return {"metadata": {"name": "team", "uid": "u"}, "spec": spec}


def test_a_queue_names_its_provisioning_class_and_reservation_buffers() -> None:
    info = queues.queue_info(
        _queue(
            {
                "autoscaling": {
                    "provisioningRequest": {
                        "provisioningClassName": autoscaling.BEST_EFFORT_ATOMIC_SCALE_UP,
                        "parameters": {"ValidUntilSeconds": "600"},
                    },
                    "reservationBuffers": True,
                }
            }
        )
    )
    assert info.invalid is None
    assert info.provisioning == queues.ProvisioningPolicy(
        class_name=autoscaling.BEST_EFFORT_ATOMIC_SCALE_UP,
        parameters=(("ValidUntilSeconds", "600"),),
    )
    assert info.reservation_buffers
    plain = queues.queue_info(_queue({}))
    assert (plain.provisioning, plain.reservation_buffers) == (None, False)


def test_a_bad_provisioning_class_makes_the_queue_invalid_naming_the_field() -> None:
    info = queues.queue_info(
        _queue({"autoscaling": {"provisioningRequest": {"provisioningClassName": "Atomic!"}}})
    )
    assert info.invalid == (
        "spec.autoscaling.provisioningRequest.provisioningClassName: provisioningClassName must "
        "be a DNS subdomain, such as best-effort-atomic-scale-up.autoscaling.x-k8s.io or "
        "check-capacity.autoscaling.x-k8s.io: 'Atomic!'"
    )
    long = queues.queue_info(
        _queue(
            {
                "autoscaling": {
                    "provisioningRequest": {
                        "provisioningClassName": autoscaling.CHECK_CAPACITY,
                        "parameters": {"x": "y" * 300},
                    }
                }
            }
        )
    )
    assert long.invalid is not None
    assert long.invalid.startswith("spec.autoscaling.provisioningRequest.parameters:")


def test_a_reservation_asks_for_a_buffer_only_when_it_says_true() -> None:
    base: Object = {
        "metadata": {"name": "r", "namespace": "t"},
        "spec": {"template": {"spec": {}}, "owners": [{"object": {"name": "p"}}]},
    }
    assert not reservations.reservation_info(base).capacity_buffer
    base["spec"]["capacityBuffer"] = True
    assert reservations.reservation_info(base).capacity_buffer
