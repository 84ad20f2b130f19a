"""Operator settings: sources, precedence, defaults and validation.

We test these aspects:

- the defaults are kube-scheduler's leader-election timings and the documented values;
- precedence: flags (keyword arguments) > ``BERTH_*`` environment > config file > defaults,
  for top-level and nested fields, with nested sources merged key by key; the Reservation
  retention's default is the controller's own;
- the config file: camelCase keys; the profile's own keys ignored, and handed to the profile
  loader with the effective scheduler name; a typo in a nested settings key refused by name;
  a missing or non-mapping file refused with its path;
- durations as numbers or Go-style strings;
- leader-election timings that could make two leaders are refused; an autoscaler hold whose
  first backoff passes its maximum is refused;
- identity and namespace come from the pod's downward-API variables when present;
- every field documents itself (an attribute docstring stating the default's reason).
"""

from __future__ import annotations

import pathlib
import socket

import pydantic
import pytest

from berth.cli import run
from berth.controllers import reservations
from berth.operator import errors, settings


def write_config(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return path


def test_defaults_are_kube_scheduler_timings_and_documented_values() -> None:
    s = settings.Settings()
    assert s.leader_election.enabled is True
    assert (
        s.leader_election.lease_duration,
        s.leader_election.renew_deadline,
        s.leader_election.retry_period,
    ) == (15.0, 10.0, 2.0)
    assert s.leader_election.lease_name == "berth-scheduler"
    assert s.scheduler_name == "berth-scheduler"
    assert s.mode is settings.Mode.SCHEDULER
    assert s.http_port == 8080
    assert s.http_authorization is True  # secure by default, as kube-scheduler's secure port
    assert s.enable_debug_api is False
    assert s.kubeconfig is None
    assert s.config is None
    assert s.log_level == "info"
    assert (s.queueing_hints, s.queueing_hints_revisit) == (True, 60.0)
    assert s.placements_per_cycle == 500


@pytest.mark.parametrize(
    ("flag", "env", "in_file", "expected"),
    [
        ("from-flag", "from-env", "from-file", "from-flag"),
        (None, "from-env", "from-file", "from-env"),
        (None, None, "from-file", "from-file"),
        (None, None, None, settings.DEFAULT_SCHEDULER_NAME),
        ("from-flag", None, "from-file", "from-flag"),
    ],
    ids=["flag-beats-all", "env-beats-file", "file-beats-default", "default", "flag-beats-file"],
)
def test_scheduler_name_precedence(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: str | None,
    env: str | None,
    in_file: str | None,
    expected: str,
) -> None:
    path = write_config(tmp_path, f"schedulerName: {in_file}\n" if in_file else "{}\n")
    if env is not None:
        monkeypatch.setenv("BERTH_SCHEDULER_NAME", env)
    flags = {"scheduler_name": flag} if flag is not None else {}
    assert settings.Settings(config=path, **flags).scheduler_name == expected


@pytest.mark.parametrize(
    ("flag", "env", "in_file", "expected"),
    [
        ("1h", "2h", "3h", 3600.0),
        (None, "2h", "3h", 7200.0),
        (None, None, "3h", 10800.0),
        (None, None, None, reservations.DEFAULT_RETENTION_SECONDS),
    ],
    ids=["flag-beats-all", "env-beats-file", "file-beats-default", "default-is-the-controllers"],
)
def test_reservation_retention_precedence(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: str | None,
    env: str | None,
    in_file: str | None,
    expected: float,
) -> None:
    path = write_config(tmp_path, f"reservationRetention: {in_file}\n" if in_file else "{}\n")
    if env is not None:
        monkeypatch.setenv("BERTH_RESERVATION_RETENTION", env)
    flags = {"reservation_retention": flag} if flag is not None else {}
    assert settings.Settings(config=path, **flags).reservation_retention == expected


@pytest.mark.parametrize(("env", "expected"), [(None, True), ("true", True), ("false", False)])
def test_plain_pods_are_charged_to_queues_unless_the_chart_turns_that_off(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, env: str | None, expected: bool
) -> None:
    if env is not None:
        monkeypatch.setenv("BERTH_ADMIT_PLAIN_PODS", env)
    path = write_config(tmp_path, "{}\n")
    assert settings.Settings(config=path).admit_plain_pods is expected


def test_nested_sources_merge_key_by_key(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(
        tmp_path,
        "leaderElection:\n  leaseDuration: 30s\n  retryPeriod: 3\n  leaseName: from-file\n",
    )
    monkeypatch.setenv("BERTH_LEADER_ELECTION__RENEW_DEADLINE", "20s")
    monkeypatch.setenv("BERTH_LEADER_ELECTION__LEASE_NAME", "from-env")
    s = settings.Settings(config=path, leader_election={"enabled": False})
    election = s.leader_election
    assert election.enabled is False  # flag
    assert election.renew_deadline == 20.0  # env
    assert election.lease_name == "from-env"  # env beats file
    assert (election.lease_duration, election.retry_period) == (30.0, 3.0)  # file


def test_config_file_is_named_by_the_environment_too(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path, "httpPort: 9001\nmode: admission\n")
    monkeypatch.setenv("BERTH_CONFIG", str(path))
    s = settings.Settings()
    assert (s.http_port, s.mode) == (9001, settings.Mode.ADMISSION)


def test_config_file_leaves_profile_keys_to_the_profile(tmp_path: pathlib.Path) -> None:
    path = write_config(
        tmp_path,
        "schedulerName: batch\nactions: [allocate]\nplugins:\n  - name: Gang\nconfig: nested\n",
    )
    s = settings.Settings(config=path)
    assert s.scheduler_name == "batch"
    assert s.config == path  # a "config" key inside the file does not redirect it


def test_profile_document_is_the_file_without_settings(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(
        tmp_path,
        "schedulerName: from-file\nhttpPort: 9000\nleaderElection: {retryPeriod: 3}\n"
        "actions: [allocate]\nplugins:\n  - name: Gang\n",
    )
    monkeypatch.setenv("BERTH_SCHEDULER_NAME", "from-env")
    assert settings.Settings(config=path).profile_document() == {
        "schedulerName": "from-env",
        "actions": ["allocate"],
        "plugins": [{"name": "Gang"}],
    }


def test_profile_document_without_a_file_names_the_scheduler() -> None:
    assert settings.Settings().profile_document() == {"schedulerName": "berth-scheduler"}


def test_config_file_typo_in_nested_settings_is_refused_by_name(tmp_path: pathlib.Path) -> None:
    path = write_config(tmp_path, "leaderElection:\n  leaseDuraton: 30s\n")
    with pytest.raises(pydantic.ValidationError, match="leaseDuraton"):
        settings.Settings(config=path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "No such file"),
        ("- a list\n", "expected a mapping, got a list"),
        ("key: [unclosed\n", "not valid YAML"),
    ],
    ids=["missing", "not-a-mapping", "bad-yaml"],
)
def test_unusable_config_file_is_refused_with_its_path(
    tmp_path: pathlib.Path, text: str | None, message: str
) -> None:
    path = tmp_path / "profile.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(errors.ConfigFileError, match=message) as caught:
        settings.Settings(config=path)
    assert str(path) in str(caught.value)


def test_empty_config_file_means_defaults(tmp_path: pathlib.Path) -> None:
    assert settings.Settings(config=write_config(tmp_path, "")).http_port == 8080


@pytest.mark.parametrize(
    ("given", "seconds"),
    [(20, 20.0), ("20", 20.0), ("20s", 20.0), ("1m30s", 90.0), ("2500ms", 2.5), (1.5, 1.5)],
    ids=["int", "numeric-string", "seconds", "minutes-and-seconds", "milliseconds", "float"],
)
def test_durations_accept_numbers_and_go_strings(given: object, seconds: float) -> None:
    s = settings.Settings(shutdown_timeout=given)
    assert s.shutdown_timeout == seconds


@pytest.mark.parametrize(
    "given",
    ["-5s", "soon", 0, -1],
    ids=["negative-duration", "not-a-duration", "zero", "negative-number"],
)
def test_bad_durations_are_refused(given: object) -> None:
    with pytest.raises(pydantic.ValidationError, match="shutdown_timeout"):
        settings.Settings(shutdown_timeout=given)


@pytest.mark.parametrize(
    ("timings", "message"),
    [
        ({"lease_duration": 10, "renew_deadline": 10}, "must be shorter than leaseDuration"),
        ({"lease_duration": 10, "renew_deadline": 12}, "must be shorter than leaseDuration"),
        ({"renew_deadline": 4, "retry_period": 4}, "longer than 1.2 x retryPeriod"),
    ],
    ids=["deadline-equals-duration", "deadline-beyond-duration", "retry-too-slow"],
)
def test_timings_that_could_make_two_leaders_are_refused(
    timings: dict[str, float], message: str
) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        settings.Settings(leader_election=timings)


def test_identity_is_the_pod_name_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "berth-7d9f-abcde")
    assert settings.Settings().leader_election.identity == "berth-7d9f-abcde"


def test_identity_outside_a_pod_is_hostname_and_unique() -> None:
    first = settings.Settings().leader_election.identity
    second = settings.Settings().leader_election.identity
    assert first.startswith(f"{socket.gethostname()}_")
    assert first != second


def test_namespace_is_the_pods_namespace_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "berth-system")
    assert settings.Settings().namespace == "berth-system"


def test_bad_log_level_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="unknown log level 'chatty'"):
        settings.Settings(log_level="chatty")


def test_unknown_flag_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="http_prot"):
        settings.Settings(http_prot=1)


def test_settings_are_frozen() -> None:
    s = settings.Settings()
    with pytest.raises(pydantic.ValidationError):
        s.http_port = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "model",
    [settings.Settings, settings.LeaderElectionSettings, settings.AutoscalingSettings],
    ids=["settings", "leader-election", "autoscaling"],
)
def test_every_field_documents_its_default(model: type[pydantic.BaseModel]) -> None:
    undocumented = [
        name
        for name, field in model.model_fields.items()
        if "default" not in (field.description or "").lower()
    ]
    assert undocumented == []


def test_queueing_hints_turn_off_by_flag_env_or_file(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every source can turn parking off: a flag, ``BERTH_QUEUEING_HINTS``, the file's
    ``queueingHints`` (and set how long a parked group waits at most)."""
    assert run._load_settings({"queueing_hints": False}).queueing_hints is False
    monkeypatch.setenv("BERTH_QUEUEING_HINTS", "false")
    assert settings.Settings().queueing_hints is False
    monkeypatch.delenv("BERTH_QUEUEING_HINTS")
    config = tmp_path / "berth.yaml"
    config.write_text("queueingHints: false\nqueueingHintsRevisit: 5m\n")
    loaded = settings.Settings(config=config)
    assert (loaded.queueing_hints, loaded.queueing_hints_revisit) == (False, 300.0)


def test_the_placements_per_cycle_come_from_env_or_file_and_are_never_negative(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BERTH_PLACEMENTS_PER_CYCLE", "0")  # no limit
    assert settings.Settings().placements_per_cycle == 0
    monkeypatch.setenv("BERTH_PLACEMENTS_PER_CYCLE", "-1")
    with pytest.raises(pydantic.ValidationError, match="placements_per_cycle"):
        settings.Settings()
    monkeypatch.delenv("BERTH_PLACEMENTS_PER_CYCLE")
    config = tmp_path / "berth.yaml"
    config.write_text("placementsPerCycle: 2000\n")
    assert settings.Settings(config=config).placements_per_cycle == 2000


def test_the_autoscaler_hold_backoff_comes_from_env_and_must_not_pass_its_maximum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    defaults = settings.Settings().autoscaling
    assert (defaults.hold_backoff, defaults.hold_backoff_max) == (300.0, 3600.0)
    monkeypatch.setenv("BERTH_AUTOSCALING__HOLD_BACKOFF", "15s")
    monkeypatch.setenv("BERTH_AUTOSCALING__HOLD_BACKOFF_MAX", "1m")
    given = settings.Settings().autoscaling
    assert (given.hold_backoff, given.hold_backoff_max) == (15.0, 60.0)
    monkeypatch.setenv("BERTH_AUTOSCALING__HOLD_BACKOFF", "2h")
    with pytest.raises(pydantic.ValidationError, match=r"holdBackoff \(7200.0s\) must not be"):
        settings.Settings()
