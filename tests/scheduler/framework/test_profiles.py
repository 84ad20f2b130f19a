"""Profiles: YAML loading, validation with clear errors, resolution against a registry.

We test these aspects:
- a full profile loads with camelCase keys and defaults;
- bad YAML names the line; unknown keys, duplicates, out-of-range weights name their path;
- resolution refuses unknown plugins and actions, validates args with their path, and keeps
  profile order; ``disabled`` drops plugins.
"""

from __future__ import annotations

import textwrap

import pydantic
import pytest

from berth.scheduler.framework import errors, profiles, registries


class GangArgs(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(
        extra="forbid", alias_generator=pydantic.alias_generators.to_camel, populate_by_name=True
    )
    default_timeout_seconds: int = 60


class Named:
    def __init__(self, name: str) -> None:
        self.name = name


REGISTRY = registries.Registry(
    {
        "Fit": registries.PluginFactory(new=lambda args, handle: Named("Fit")),
        "Least": registries.PluginFactory(new=lambda args, handle: Named("Least")),
        "Gang": registries.PluginFactory(new=lambda args, handle: Named("Gang"), args=GangArgs),
    }
)


def test_a_full_profile_loads() -> None:
    profile = profiles.load(
        textwrap.dedent(
            """
            schedulerName: batch
            actions: [allocate]
            plugins:
              - name: Fit
              - name: Least
                weight: 3
              - name: Gang
                args: {defaultTimeoutSeconds: 30}
            """
        )
    )
    assert profile.scheduler_name == "batch"
    assert [(p.name, p.weight) for p in profile.plugins] == [("Fit", 1), ("Least", 3), ("Gang", 1)]
    resolved = profiles.resolve(profile, registry=REGISTRY, actions={"allocate"})
    assert [p.name for p in resolved.plugins] == ["Fit", "Least", "Gang"]
    assert resolved.plugins[2].args == GangArgs(default_timeout_seconds=30)


def test_an_empty_document_is_the_default_profile() -> None:
    profile = profiles.load("")
    assert profile == profiles.Profile()
    assert profile.scheduler_name == "berth-scheduler"
    assert profile.actions == ("allocate",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "plugins: [name: Fit",
            "profile is not valid YAML at line 1, column 20:"
            " expected ',' or ']', but got '<stream end>'",
        ),
        ("- a\n- b\n", "profile is not a valid profile:\n  expected a mapping, got list"),
        (
            "plugin: []",
            "profile is not a valid profile:\n  plugin: Extra inputs are not permitted",
        ),
        (
            "plugins: [{name: Fit, weight: 0}]",
            "profile is not a valid profile:\n"
            "  plugins[0].weight: Input should be greater than or equal to 1",
        ),
        (
            "plugins: [{name: Fit}, {name: Fit}]",
            "profile is not a valid profile:\n  profile: Value error, plugin Fit is listed twice",
        ),
    ],
    ids=["bad-yaml", "not-a-mapping", "unknown-key", "weight-range", "duplicate-plugin"],
)
def test_invalid_profiles_give_clear_errors(text: str, message: str) -> None:
    with pytest.raises(errors.ProfileError) as caught:
        profiles.load(text)
    assert str(caught.value) == message


def test_resolution_lists_every_problem_with_its_path() -> None:
    profile = profiles.load(
        "actions: [allocate, teleport]\n"
        "plugins:\n"
        "  - {name: Fit}\n"
        "  - {name: Nope}\n"
        "  - {name: Gang, args: {defaultTimeoutSeconds: soon, extra: 1}}\n"
    )
    with pytest.raises(errors.ProfileError) as caught:
        profiles.resolve(profile, registry=REGISTRY, actions={"allocate"}, source="my.yaml")
    assert str(caught.value) == (
        "my.yaml is not a valid profile:\n"
        "  actions[1]: unknown action 'teleport' (known: allocate)\n"
        "  plugins[1].name: unknown plugin 'Nope' (known: Fit, Gang, Least)\n"
        "  plugins[2].args.defaultTimeoutSeconds: Input should be a valid integer,"
        " unable to parse string as an integer\n"
        "  plugins[2].args.extra: Extra inputs are not permitted"
    )


@pytest.mark.parametrize(
    ("disabled", "expected"),
    [((), ["Fit", "Least"]), (("Least",), ["Fit"]), (("*",), [])],
    ids=["none", "one", "star"],
)
def test_disabled_drops_plugins(disabled: tuple[str, ...], expected: list[str]) -> None:
    profile = profiles.Profile(
        plugins=(profiles.PluginConfig(name="Fit"), profiles.PluginConfig(name="Least")),
        disabled=disabled,
    )
    resolved = profiles.resolve(profile, registry=REGISTRY, actions={"allocate"})
    assert [p.name for p in resolved.plugins] == expected


def test_load_file_names_the_file(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "profile.yaml"  # type: ignore[operator]
    path.write_text("plugins: {}\n")
    with pytest.raises(errors.ProfileError, match=r"profile\.yaml is not a valid profile"):
        profiles.load_file(path)
