"""Profiles: which actions run, which plugins are enabled with which args, and score weights.

A profile is YAML (validated by pydantic, camelCase keys)::

    schedulerName: berth-scheduler
    actions: [allocate]
    plugins:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}
        weight: 2                 # Score weight (1..100); other points ignore it
      - name: Gang
        args: {defaultScheduleTimeoutSeconds: 60}
    disabled: [ImageLocality]     # optional: drop these from the list ("*" drops all)

The list order is the order plugins run at every extension point. :func:`resolve` checks a
profile against a plugin registry and the known actions and validates every plugin's args into
its model, so mistakes surface when the profile is loaded, with their path, never mid-cycle;
a plugin the registry lists as retired is refused with what to write instead.
The default profile is built by ``berth.scheduler.plugins.registry.default_profile()`` (the
registry owns the list of in-tree plugins).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import pathlib
import typing

import pydantic
import pydantic.alias_generators
import yaml

from berth.api import keys
from berth.scheduler.framework import errors, registries

__all__ = [
    "ConfiguredPlugin",
    "PluginConfig",
    "Profile",
    "ResolvedProfile",
    "load",
    "load_file",
    "resolve",
]

DEFAULT_ACTIONS = ("allocate",)


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


class PluginConfig(_Model):
    """One enabled plugin."""

    name: str = pydantic.Field(min_length=1)
    """The name the plugin is registered under."""
    # Untyped: each plugin validates its own args (registries.validate_args), of any shape.
    args: dict[str, typing.Any] = pydantic.Field(default_factory=dict)
    """The plugin's arguments, validated by its own model when the profile is resolved."""
    weight: int = pydantic.Field(default=1, ge=1, le=100)
    """Multiplies the plugin's normalised scores (0..100); 1 by default, as in Kubernetes."""


class Profile(_Model):
    """A scheduler profile, as written in YAML."""

    scheduler_name: str = pydantic.Field(default=keys.DEFAULT_SCHEDULER_NAME, min_length=1)
    """Pods whose ``spec.schedulerName`` is this are scheduled with this profile."""
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    """Actions run by each session, in order."""
    plugins: tuple[PluginConfig, ...] = ()
    """Enabled plugins, in the order they run at each extension point."""
    disabled: tuple[str, ...] = ()
    """Names dropped from ``plugins`` (``"*"`` drops them all), handy over a default list."""

    @pydantic.model_validator(mode="after")
    def _no_duplicates(self) -> Profile:
        for what, names in (("plugin", [p.name for p in self.plugins]), ("action", self.actions)):
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    raise ValueError(f"{what} {name} is listed twice")
                seen.add(name)
        return self

    def enabled(self) -> tuple[PluginConfig, ...]:
        """``plugins`` without the ``disabled`` ones."""
        if "*" in self.disabled:
            return ()
        return tuple(p for p in self.plugins if p.name not in self.disabled)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConfiguredPlugin:
    """An enabled plugin with its factory and validated args."""

    name: str
    factory: registries.AnyFactory
    args: pydantic.BaseModel
    weight: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResolvedProfile:
    """A profile checked against a registry: what the runtime builds plugins from."""

    profile: Profile
    plugins: tuple[ConfiguredPlugin, ...]

    @property
    def actions(self) -> tuple[str, ...]:
        return self.profile.actions

    @property
    def scheduler_name(self) -> str:
        return self.profile.scheduler_name


def _path(loc: collections.abc.Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "profile"


def _problems(exc: pydantic.ValidationError, *, prefix: str = "") -> list[str]:
    lines = []
    for error in exc.errors(include_url=False):
        path = _path(error["loc"])
        where = f"{prefix}.{path}" if prefix and path != "profile" else (prefix or path)
        lines.append(f"{where}: {error['msg']}")
    return lines


def _raise(problems: list[str], *, source: str) -> typing.NoReturn:
    raise errors.ProfileError(f"{source} is not a valid profile:\n  " + "\n  ".join(problems))


def parse(data: typing.Any, *, source: str = "profile") -> Profile:
    """A :class:`Profile` from already loaded data; ``ProfileError`` listing every problem."""
    try:
        return Profile.model_validate(data)
    except pydantic.ValidationError as exc:
        _raise(_problems(exc), source=source)


def load(text: str, *, source: str = "profile") -> Profile:
    """A :class:`Profile` from YAML text; ``ProfileError`` naming the line of a YAML error."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise errors.ProfileError(f"{source} is not valid YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, collections.abc.Mapping):
        _raise([f"expected a mapping, got {type(data).__name__}"], source=source)
    return parse(data, source=source)


def load_file(path: str | pathlib.Path) -> Profile:
    """A :class:`Profile` from a YAML file."""
    path = pathlib.Path(path)
    return load(path.read_text(encoding="utf-8"), source=str(path))


def resolve(
    profile: Profile,
    *,
    registry: registries.Registry,
    actions: collections.abc.Collection[str],
    source: str = "profile",
) -> ResolvedProfile:
    """Check ``profile`` against ``registry`` and the known ``actions``; validate every args.

    Raises ``ProfileError`` listing every problem (unknown plugin or action, bad args) with its
    path in the profile, e.g. ``plugins[2].args.minMember: Input should be a valid integer``.
    """
    problems: list[str] = []
    for i, action in enumerate(profile.actions):
        if action not in actions:
            known = ", ".join(sorted(actions))
            problems.append(f"actions[{i}]: unknown action {action!r} (known: {known})")
    configured: list[ConfiguredPlugin] = []
    enabled = {id(p) for p in profile.enabled()}
    for i, plugin in enumerate(profile.plugins):
        factory = registry.get(plugin.name)
        retired = registry.retired(plugin.name)
        if factory is None and retired is not None:
            problems.append(f"plugins[{i}].name: {retired}")
            continue
        if factory is None:
            known = ", ".join(sorted(registry))
            problems.append(f"plugins[{i}].name: unknown plugin {plugin.name!r} (known: {known})")
            continue
        try:
            args = factory.validate_args(plugin.args)
        except pydantic.ValidationError as exc:
            problems.extend(_problems(exc, prefix=f"plugins[{i}].args"))
            continue
        if id(plugin) in enabled:
            configured.append(
                ConfiguredPlugin(name=plugin.name, factory=factory, args=args, weight=plugin.weight)
            )
    for i, name in enumerate(profile.disabled):
        # Disabling a retired plugin meant choosing another strategy: say which, do not ignore it.
        retired = registry.retired(name)
        if retired is not None:
            problems.append(f"disabled[{i}]: {retired}")
    if problems:
        _raise(problems, source=source)
    return ResolvedProfile(profile=profile, plugins=tuple(configured))
