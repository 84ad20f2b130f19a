"""helm-sdkpy Lint of helm/berth.

Aspects:
- the chart lints with no warnings or errors with its default values and with every option set
  (the option sets of ``charts.OPTION_SETS`` together change every documented value);
- every value in values.yaml is documented in values.schema.json (with a description) and the
  other way round, so the option sets cannot silently miss a new option;
- values the schema refuses make lint fail, so a clean lint means something;
- the default profile in values.yaml is the scheduler's built-in default profile.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from berth.scheduler.framework import profiles
from berth.scheduler.plugins import registry
from tests.packaging import charts


@pytest.mark.parametrize("overrides", charts.OPTION_SETS.values(), ids=charts.OPTION_SETS.keys())
async def test_chart_lints_without_warnings(
    tmp_path: pathlib.Path, overrides: charts.Values
) -> None:
    chart = charts.chart_with_values(tmp_path, overrides) if overrides else charts.CHART
    messages = await charts.lint(chart)
    assert charts.problems(messages) == []


def test_schema_documents_exactly_the_values_in_values_yaml() -> None:
    schema = json.loads((charts.CHART / "values.schema.json").read_text())
    defaults = charts.default_values()
    leaves = charts.schema_leaves(schema)
    undocumented = [key for key in defaults if key not in schema["properties"] and key != "global"]
    without_default = [
        ".".join(p)
        for p in leaves
        if p != ("global",) and charts.lookup(defaults, p) is charts.MISSING
    ]
    assert undocumented == []
    assert without_default == []


def test_every_schema_property_has_a_description() -> None:
    schema = json.loads((charts.CHART / "values.schema.json").read_text())

    def undescribed(properties: charts.Values, prefix: str) -> list[str]:
        missing: list[str] = []
        for name, sub in properties.items():
            path = f"{prefix}{name}"
            if not sub.get("description"):
                missing.append(path)
            missing.extend(undescribed(sub.get("properties", {}), f"{path}."))
        return missing

    assert undescribed(schema["properties"], "") == []


def test_option_sets_change_every_documented_value() -> None:
    schema = json.loads((charts.CHART / "values.schema.json").read_text())
    defaults = charts.default_values()
    unexercised = [
        ".".join(path)
        for path in charts.schema_leaves(schema)
        if path != ("global",)
        and not any(
            charts.lookup(o, path) not in (charts.MISSING, charts.lookup(defaults, path))
            for o in charts.OPTION_SETS.values()
        )
    ]
    assert unexercised == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"mode": "kube-scheduler"},
        {"logLevel": "loud"},
        {"replicaCount": 0},
        {"replicas": 2},
        {"schedulerName": "Berth_Scheduler"},
        {"leaderElection": {"enabled": "yes"}},
        {"podAntiAffinity": "strict"},
        {"image": {"digest": "latest"}},
        {"metrics": {"serviceMonitor": {"interval": "often"}}},
        {"extraPlugins": [{"weight": 2}]},
        {"evictionWait": "soon"},
        {"reservationRetention": 86400},
    ],
    ids=[
        "unknown-mode",
        "unknown-log-level",
        "no-replicas",
        "misspelt-key",
        "scheduler-name-not-dns",
        "boolean-as-string",
        "unknown-anti-affinity",
        "digest-not-sha256",
        "interval-not-duration",
        "plugin-without-name",
        "eviction-wait-not-duration",
        "retention-not-a-string",
    ],
)
async def test_lint_fails_on_values_the_schema_refuses(
    tmp_path: pathlib.Path, overrides: charts.Values
) -> None:
    messages = await charts.lint(charts.chart_with_values(tmp_path, overrides))
    assert charts.LintMessage(charts.Severity.ERROR, "values.yaml") in messages


def test_default_profile_is_the_schedulers_default() -> None:
    profile = charts.default_values()["profile"]
    parsed = profiles.parse({**profile, "schedulerName": charts.default_values()["schedulerName"]})
    assert parsed == registry.default_profile(), (
        "helm/berth/values.yaml's profile differs from DEFAULT_PROFILE_YAML in "
        "berth/scheduler/plugins/registry.py: copy the actions and plugins over"
    )
