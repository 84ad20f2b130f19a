"""What the autoscaler did for a waiting group (``berth.status.scale_up``), decided purely.

We test these aspects:

- an Event is a sighting by its source and reason alone (Karpenter's ``Nominated`` and
  ``FailedScheduling``, Cluster Autoscaler's ``TriggeredScaleUp`` and ``NotTriggerScaleUp``);
  kube-scheduler's own ``FailedScheduling``, Events about other kinds, and Events without a
  time are not; its time is the latest it carries;
- a gang's verdict: any member the autoscaler cannot fit makes the whole gang
  ``AutoscalerCannotFit`` quoting the autoscaler's words (even beside plans for others); a
  member's newer sighting replaces its older one; a plan is ``ScalingUp``; nothing said is
  nothing to say until the timeout, then ``NoAutoscalerActed`` — only on a cluster with an
  autoscaler's API; a plan older than the gang's wait, or one not repeated for five minutes,
  does not count; the words do not change while nothing does;
- a request's state maps to its code (refused, unanswered before and after the timeout);
- the ``ScaleUp`` condition: status per code, other conditions kept, the transition time kept
  while its status holds, removed with no verdict;
- a gang asking with a CapacityBuffer per pod shape: a buffer ``Infeasible`` makes it
  ``AutoscalerCannotFit`` at once; on Karpenter v1.15 (no such reason), a buffer ``False`` for
  the timeout while another of the gang's reads ``True``, not a moment before; a gang none of
  whose buffers reads ``True`` (nothing bought for it) or whose buffers only just answered
  keeps its request's code;
- holding a gang the autoscaler cannot fit (virtual time): held at its first refusal, with a
  reason no autoscaler reads that says until when; shown again after five minutes; held again
  only when the autoscaler says it again after that, twice as long each time, never longer
  than an hour; an old refusal never holds it again; any other verdict (or none) releases it
  at once and the next refusal starts over at five minutes.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.framework import pending, reasons
from berth.status import capacity_requests as plans
from berth.status import conditions, scale_up

R = scale_up.ScaleUpReason
Code = reasons.ReasonCode
T0 = 1_800_000_000.0
MEMBERS = {"team/train-0": "u0", "team/train-1": "u1", "team/train-2": "u2"}
FAILED = (
    'Failed to schedule pod, incompatible with nodepool "autoscaled", daemonset overhead='
    '{"cpu":"0"}, no instance type has enough resources'
)


def event(
    uid: str,
    *,
    reason: str,
    source: str = "karpenter",
    at: float = T0,
    message: str = "",
    kind: str = "Pod",
) -> dict[str, typing.Any]:
    return {
        "involvedObject": {"kind": kind, "namespace": "team", "name": "x", "uid": uid},
        "reason": reason,
        "message": message,
        "source": {"component": source},
        "firstTimestamp": conditions.timestamp(at - 60),
        "lastTimestamp": conditions.timestamp(at),
        "metadata": {"creationTimestamp": conditions.timestamp(at - 60)},
    }


def seen(uid: str, action: scale_up.Action, at: float, message: str = "") -> scale_up.Sighting:
    return scale_up.Sighting(uid, scale_up.KARPENTER, action, at, message)


@pytest.mark.parametrize(
    ("given", "action"),
    [
        (event("u0", reason="Nominated"), scale_up.Action.PLANNED),
        (event("u0", reason="FailedScheduling"), scale_up.Action.CANNOT_FIT),
        (
            event("u0", reason="TriggeredScaleUp", source="cluster-autoscaler"),
            scale_up.Action.PLANNED,
        ),
        (
            event("u0", reason="NotTriggerScaleUp", source="cluster-autoscaler"),
            scale_up.Action.CANNOT_FIT,
        ),
        (event("u0", reason="FailedScheduling", source="default-scheduler"), None),
        (event("u0", reason="FailedScheduling", source="berth-scheduler"), None),
        (event("u0", reason="Nominated", kind="NodeClaim"), None),
        (event("u0", reason="Launched"), None),
    ],
    ids=[
        "karpenter-plan",
        "karpenter-cannot",
        "ca-plan",
        "ca-cannot",
        "kube-scheduler",
        "berth",
        "not-a-pod",
        "other-reason",
    ],
)
def test_an_event_is_a_sighting_by_source_and_reason(
    given: dict[str, typing.Any], action: scale_up.Action | None
) -> None:
    found = scale_up.sighting_of(given)
    assert (found.action if found is not None else None) is action
    if found is not None:
        assert (found.pod_uid, found.at) == ("u0", T0)


def test_reporting_component_and_event_time_serve_events_k8s_io_writers() -> None:
    given = {
        "involvedObject": {"kind": "Pod", "uid": "u0"},
        "reason": "FailedScheduling",
        "reportingComponent": "karpenter",
        "eventTime": "2027-01-15T08:00:00.123456Z",
        "message": FAILED,
    }
    found = scale_up.sighting_of(given)
    assert found is not None and found.action is scale_up.Action.CANNOT_FIT
    assert found.message == FAILED
    assert scale_up.sighting_of({**given, "eventTime": None}) is None


def judge(
    sightings: list[scale_up.Sighting],
    *,
    now: float = T0 + 10,
    autoscaled: bool = True,
    since: float = T0,
) -> scale_up.ScaleUp | None:
    return scale_up.judge(
        MEMBERS, sightings, since=since, now=now, timeout=120.0, autoscaled=autoscaled
    )


def test_one_member_the_autoscaler_cannot_fit_holds_the_whole_gang() -> None:
    verdict = judge(
        [
            seen("u0", scale_up.Action.PLANNED, T0 + 2, "Pod should schedule on: nodeclaim/a"),
            seen("u1", scale_up.Action.CANNOT_FIT, T0 + 1, FAILED),
            seen("u2", scale_up.Action.PLANNED, T0 + 2, "Pod should schedule on: nodeclaim/a"),
        ]
    )
    assert verdict == scale_up.ScaleUp(
        R.AUTOSCALER_CANNOT_FIT,
        "Karpenter cannot place 1 of its 3 waiting pods on any node it could add, and the gang "
        f"is placed whole or not at all (pod team/train-1: {FAILED})",
        at=T0 + 1,
    )
    assert (verdict.status, verdict.warning) == ("False", True)


def test_a_newer_sighting_replaces_an_older_one() -> None:
    before = seen("u0", scale_up.Action.CANNOT_FIT, T0 + 1, FAILED)
    after = seen("u0", scale_up.Action.PLANNED, T0 + 5, "Pod should schedule on: nodeclaim/b")
    verdict = judge([after, before])
    assert verdict is not None and verdict.code is R.SCALING_UP
    assert verdict.message == (
        "Karpenter plans nodes for 1 of its 3 waiting pods "
        "(pod team/train-0: Pod should schedule on: nodeclaim/b)"
    )
    assert verdict.status == "True"
    again = judge([before, seen("u0", scale_up.Action.CANNOT_FIT, T0 + 9, FAILED), after])
    assert again is not None and again.code is R.AUTOSCALER_CANNOT_FIT


def test_sightings_of_other_pods_do_not_count() -> None:
    assert judge([seen("other", scale_up.Action.CANNOT_FIT, T0 + 1, FAILED)]) is None


def test_nobody_acting_is_said_after_the_timeout_only_where_an_autoscaler_is_served() -> None:
    assert judge([], now=T0 + 119) is None
    verdict = judge([], now=T0 + 120)
    assert verdict == scale_up.ScaleUp(
        R.NO_AUTOSCALER_ACTED,
        "no autoscaler has acted on its 3 Unschedulable pods in 120s: is Karpenter or "
        "Cluster Autoscaler running, and does any of its node pools or groups match the pods?",
    )
    assert verdict.warning
    # The words stay the same as time passes (no status rewrite, no new Event).
    assert judge([], now=T0 + 500) == verdict
    # A cluster without any autoscaler API: nobody was expected to act.
    assert judge([], now=T0 + 500, autoscaled=False) is None


def test_a_stalled_or_earlier_plan_does_not_count() -> None:
    plan = seen("u0", scale_up.Action.PLANNED, T0 + 5, "Pod should schedule on: nodeclaim/a")
    fresh = judge([plan], now=T0 + 5 + scale_up.PLAN_STANDS)
    assert fresh is not None and fresh.code is R.SCALING_UP
    stalled = judge([plan], now=T0 + 6 + scale_up.PLAN_STANDS)
    assert stalled is not None and stalled.code is R.NO_AUTOSCALER_ACTED
    assert "in 120s since its last plan:" in stalled.message
    # A plan made before the gang began waiting (since) is not about this wait.
    earlier = judge([plan], since=T0 + 100, now=T0 + 110)
    assert earlier is None


@pytest.mark.parametrize(
    ("state", "overdue", "served", "code"),
    [
        (plans.State.UNANSWERED, False, True, R.CAPACITY_REQUESTED),
        (plans.State.UNANSWERED, True, True, R.NO_AUTOSCALER_ACTED),
        (plans.State.PENDING, True, True, R.CAPACITY_REQUEST_PENDING),
        (plans.State.PROVISIONED, False, True, R.CAPACITY_PROVISIONED),
        (plans.State.REFUSED, False, True, R.CAPACITY_REQUEST_REFUSED),
        (plans.State.UNANSWERED, False, False, R.CAPACITY_API_UNSERVED),
    ],
)
def test_a_requests_state_maps_to_its_code(
    state: plans.State, overdue: bool, served: bool, code: scale_up.ScaleUpReason
) -> None:
    assert scale_up.of_request(state, overdue=overdue, served=served) is code


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (R.SCALING_UP, "True"),
        (R.CAPACITY_PROVISIONED, "True"),
        (R.CAPACITY_REQUESTED, "Unknown"),
        (R.CAPACITY_REQUEST_PENDING, "Unknown"),
        (R.AUTOSCALER_CANNOT_FIT, "False"),
        (R.NO_AUTOSCALER_ACTED, "False"),
        (R.CAPACITY_REQUEST_REFUSED, "False"),
        (R.CAPACITY_API_UNSERVED, "False"),
    ],
)
def test_every_code_has_a_condition_status(code: scale_up.ScaleUpReason, status: str) -> None:
    assert scale_up.ScaleUp(code, "m").status == status


def test_the_condition_keeps_others_and_its_transition_time() -> None:
    other = {"type": "Scheduled", "status": "False", "reason": "NotEnoughResources"}
    first = scale_up.with_condition(
        [other], scale_up.ScaleUp(R.AUTOSCALER_CANNOT_FIT, FAILED), now=T0
    )
    assert [c["type"] for c in first] == ["ScaleUp", "Scheduled"]
    assert first[0] == {
        "type": "ScaleUp",
        "status": "False",
        "reason": "AutoscalerCannotFit",
        "message": FAILED,
        "lastTransitionTime": conditions.timestamp(T0),
    }
    same_status = scale_up.with_condition(
        first, scale_up.ScaleUp(R.NO_AUTOSCALER_ACTED, "none"), now=T0 + 60
    )
    assert same_status[0]["lastTransitionTime"] == conditions.timestamp(T0)
    assert same_status[0]["reason"] == "NoAutoscalerActed"
    moved = scale_up.with_condition(first, scale_up.ScaleUp(R.SCALING_UP, "p"), now=T0 + 60)
    assert moved[0]["lastTransitionTime"] == conditions.timestamp(T0 + 60)
    assert scale_up.with_condition(first, None, now=T0 + 60) == [other]


# Holding a gang the autoscaler cannot fit ------------------------------------------------------

GANG = "team/train"


def cannot(at: float) -> scale_up.ScaleUp:
    return scale_up.ScaleUp(R.AUTOSCALER_CANNOT_FIT, "Karpenter cannot place 1 of its 3", at=at)


def test_a_gang_the_autoscaler_cannot_fit_is_held_then_shown_again_with_a_backoff() -> None:
    holds = scale_up.Holds()
    assert holds.update({GANG: cannot(T0)}, now=T0 + 3)
    reason = holds.held[GANG]
    assert reason.code is Code.AUTOSCALER_CANNOT_FIT
    assert not pending.needs_capacity(reason.code)  # no autoscaler acts on it
    assert reason.message == (
        "pod group team/train: Karpenter cannot place 1 of its 3; so that no node is bought "
        "for the members that fit, its pods are kept off the autoscalers' list until "
        f"{conditions.timestamp(T0 + 303)} (backoff 5m0s), then shown to them again"
    )
    assert dict(reason.details) == {"group": GANG, "until": T0 + 303}
    # Nothing changes while the hold lasts, whatever the passes see.
    assert not holds.update({GANG: cannot(T0)}, now=T0 + 302)
    assert holds.until(GANG) == T0 + 303
    # Its end: shown to the autoscaler again; the old refusal does not hold it again.
    assert holds.update({GANG: cannot(T0)}, now=T0 + 303)
    assert GANG not in holds.held and holds.until(GANG) is None
    assert not holds.update({GANG: cannot(T0)}, now=T0 + 900)
    # The autoscaler says it again: held twice as long.
    assert holds.update({GANG: cannot(T0 + 905)}, now=T0 + 906)
    assert holds.until(GANG) == T0 + 906 + 600
    assert "(backoff 10m0s)" in holds.held[GANG].message


def test_the_backoff_doubles_up_to_an_hour() -> None:
    holds = scale_up.Holds()
    now = T0
    seen: list[float] = []
    for _ in range(7):
        holds.update({GANG: cannot(now)}, now=now)
        until = holds.until(GANG)
        assert until is not None
        seen.append(until - now)
        now = until  # released, and said again at once
    assert seen == [300, 600, 1200, 2400, 3600, 3600, 3600]


def test_a_refusal_stamped_a_little_before_the_release_counts_as_said_again() -> None:
    # The autoscaler's clock may lag Berth's by seconds: its answer to the pods shown again
    # can be stamped just before the hold's end.
    holds = scale_up.Holds()
    holds.update({GANG: cannot(T0)}, now=T0)
    holds.update({GANG: cannot(T0 + 290)}, now=T0 + 301)
    assert holds.until(GANG) == T0 + 301 + 600


def test_a_hold_shorter_than_the_skew_is_released_not_renewed_by_its_own_round() -> None:
    # A short hold (a test's, or a cluster that wants its NodePool changes seen sooner): the
    # refusals of the round that started it -- one member's Event a second after another's --
    # are not the autoscaler saying it again, and the pods are shown to it again.
    holds = scale_up.Holds(first=15, cap=60)
    assert holds.update({GANG: cannot(T0)}, now=T0 + 4)
    assert holds.until(GANG) == T0 + 19
    assert not holds.update({GANG: cannot(T0 + 1)}, now=T0 + 10)  # the round's later Event
    assert holds.update({GANG: cannot(T0 + 1)}, now=T0 + 19)
    assert holds.held == {}
    assert not holds.update({GANG: cannot(T0 + 1)}, now=T0 + 40)
    # Said again once shown again (even stamped a few seconds early): held twice as long.
    assert holds.update({GANG: cannot(T0 + 17)}, now=T0 + 41)
    assert holds.until(GANG) == T0 + 41 + 30


def test_any_other_verdict_releases_the_gang_and_a_later_refusal_starts_over() -> None:
    holds = scale_up.Holds()
    holds.update({GANG: cannot(T0)}, now=T0)
    holds.update({GANG: cannot(T0 + 301)}, now=T0 + 301)  # second round: 10 minutes
    planned = scale_up.ScaleUp(R.SCALING_UP, "Karpenter plans nodes for 3 of its 3", at=None)
    assert holds.update({GANG: planned}, now=T0 + 320)
    assert holds.held == {}
    assert holds.update({GANG: cannot(T0 + 400)}, now=T0 + 401)
    assert holds.until(GANG) == T0 + 401 + 300
    assert holds.update({}, now=T0 + 402)  # placed or gone
    assert holds.held == {}
    assert not holds.update({}, now=T0 + 403)


def test_each_gang_is_held_on_its_own() -> None:
    holds = scale_up.Holds()
    holds.update({GANG: cannot(T0)}, now=T0)
    holds.update({GANG: cannot(T0), "team/other": cannot(T0 + 100)}, now=T0 + 100)
    holds.update({GANG: cannot(T0), "team/other": cannot(T0 + 100)}, now=T0 + 300)
    assert set(holds.held) == {"team/other"}
    assert holds.until("team/other") == T0 + 400


def test_a_hold_backoff_must_be_positive_and_bounded() -> None:
    with pytest.raises(ValueError, match="0 < first <= cap"):
        scale_up.Holds(first=0)
    with pytest.raises(ValueError, match="0 < first <= cap"):
        scale_up.Holds(first=600, cap=300)


def buffer(name: str, fit: plans.Fit, *, pods: int = 1, since: float = T0) -> scale_up.BufferSaid:
    detail = {
        plans.Fit.FITS: "Provisioning=True (FitsExistingCapacity: All 2 virtual pods fit)",
        plans.Fit.SHORT: "Provisioning=False (RequiresNewCapacity: 0/1 virtual pods required "
        "new capacity, 1 failed)",
        plans.Fit.INFEASIBLE: "Provisioning=False (Infeasible: no instance type fits)",
        plans.Fit.UNKNOWN: "",
    }[fit]
    return scale_up.BufferSaid(f"team/{name}", pods, fit, since, detail)


def test_a_buffer_the_autoscaler_says_is_infeasible_holds_the_gang_at_once() -> None:
    said = [buffer("b-0", plans.Fit.SHORT, pods=2), buffer("b-1", plans.Fit.INFEASIBLE)]
    verdict = scale_up.judge_buffers(said, now=T0, timeout=120)
    assert verdict == scale_up.ScaleUp(
        R.AUTOSCALER_CANNOT_FIT,
        "the autoscaler cannot place 1 of its 3 waiting pods on any node it could add, and the "
        "gang is placed whole or not at all (CapacityBuffer team/b-1: Provisioning=False "
        "(Infeasible: no instance type fits))",
        at=T0,
    )
    assert verdict.status == "False"


def test_a_shape_left_short_beside_one_that_fits_is_one_the_autoscaler_cannot_fit() -> None:
    said = [
        buffer("b-0", plans.Fit.FITS, pods=2, since=T0 + 30),
        buffer("b-1", plans.Fit.SHORT, since=T0),
    ]
    assert scale_up.judge_buffers(said, now=T0 + 119, timeout=120) is None
    verdict = scale_up.judge_buffers(said, now=T0 + 120, timeout=120)
    assert verdict is not None and verdict.code is R.AUTOSCALER_CANNOT_FIT
    assert verdict.at == T0 + 120  # when it came true, not when it was read
    assert verdict.message == (
        "the autoscaler has room for 2 of its 3 waiting pods but, in 120s, none for 1 more, and "
        "the gang is placed whole or not at all (CapacityBuffer team/b-1: Provisioning=False "
        "(RequiresNewCapacity: 0/1 virtual pods required new capacity, 1 failed))"
    )
    # The words stay the same while nothing changes.
    later = scale_up.judge_buffers(said, now=T0 + 600, timeout=120)
    assert later == verdict


def test_a_shape_short_while_a_node_is_still_launching_is_not_judged_until_launches_stop() -> None:
    # A cloud slower than the timeout to launch the short shape's node: while any NodeClaim is
    # on its way, the shape is not one the autoscaler cannot fit; the time counts from the
    # last launch seen.
    said = [
        buffer("b-0", plans.Fit.FITS, pods=2, since=T0 + 30),
        buffer("b-1", plans.Fit.SHORT, since=T0),
    ]
    assert scale_up.judge_buffers(said, now=T0 + 200, timeout=120, launching=T0 + 190) is None
    assert scale_up.judge_buffers(said, now=T0 + 309, timeout=120, launching=T0 + 190) is None
    verdict = scale_up.judge_buffers(said, now=T0 + 310, timeout=120, launching=T0 + 190)
    assert verdict is not None and verdict.code is R.AUTOSCALER_CANNOT_FIT
    assert verdict.at == T0 + 310
    # A launch seen before the shape went short does not delay it.
    early = scale_up.judge_buffers(said, now=T0 + 120, timeout=120, launching=T0 - 50)
    assert early is not None and early.at == T0 + 120


@pytest.mark.parametrize(
    "said",
    [
        # Nothing fits anywhere: no node is bought for it, its request's code stands.
        [buffer("b-0", plans.Fit.SHORT), buffer("b-1", plans.Fit.SHORT)],
        [buffer("b-0", plans.Fit.SHORT)],
        # Not answered yet where the other fits.
        [buffer("b-0", plans.Fit.FITS), buffer("b-1", plans.Fit.UNKNOWN)],
        # All of it fits.
        [buffer("b-0", plans.Fit.FITS), buffer("b-1", plans.Fit.FITS)],
        [],
    ],
)
def test_a_gang_with_no_shape_left_short_beside_one_that_fits_keeps_its_code(
    said: list[scale_up.BufferSaid],
) -> None:
    assert scale_up.judge_buffers(said, now=T0 + 3600, timeout=120) is None
