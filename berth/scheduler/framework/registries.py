"""``Registry``: plugin name -> factory; and ``plugin_factory_proxy``, how every plugin is built.

The in-tree registry is one literal (``berth.scheduler.plugins.registry.in_tree_registry``);
out-of-tree plugins arrive through :meth:`Registry.merge`. There is no process-global registry
and nothing registers on import (R6). A factory pairs the plugin's ``new(args, handle)`` with
the pydantic model of its arguments, so a profile's args are validated once, when the profile
is resolved, and the plugin receives a typed value::

    Registry({
        # Node basics
        names.NODE_NAME: registries.PluginFactory(new=node_name.new),
        names.GANG: registries.PluginFactory(new=gang.new, args=gang.GangArgs),
    })
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import pydantic
import pydantic.alias_generators

from berth.scheduler.framework import errors, handles, interfaces

__all__ = ["ArgsModel", "NoArgs", "PluginFactory", "Registry", "plugin_factory_proxy"]


class ArgsModel(pydantic.BaseModel):
    """Base of a plugin's arguments model (and of the models inside one): keys in camelCase as
    a profile writes them (snake_case accepted too), an unknown key is an error, and the
    validated arguments are frozen."""

    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


class NoArgs(pydantic.BaseModel):
    """The arguments of a plugin that takes none (any key given is an error)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


_ArgsT = typing.TypeVar("_ArgsT", bound=pydantic.BaseModel)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PluginFactory(typing.Generic[_ArgsT]):
    """How to build one plugin: ``new(args, handle)`` and the model ``args`` validates into."""

    new: collections.abc.Callable[[_ArgsT, handles.ExtendedHandle], interfaces.Plugin]
    args: type[_ArgsT] = NoArgs  # type: ignore[assignment]  # NoArgs is the default model
    proxied: bool = False  # True once wrapped by plugin_factory_proxy (never wrap twice)

    # Untyped: a profile's args as the user wrote them; the plugin's model validates them.
    def validate_args(self, raw: collections.abc.Mapping[str, typing.Any] | None) -> _ArgsT:
        """``raw`` (from a profile) as the plugin's args model; ``pydantic.ValidationError``."""
        return self.args.model_validate(dict(raw or {}))

    def build(self, args: _ArgsT, *, handle: handles.ExtendedHandle) -> interfaces.Plugin:
        """A new plugin instance."""
        return self.new(args, handle)


AnyFactory = PluginFactory[typing.Any]


def plugin_factory_proxy(factory: PluginFactory[_ArgsT]) -> PluginFactory[_ArgsT]:
    """``factory`` wrapped so that the plugin's extra capabilities reach the handle.

    The wrapped factory builds the plugin with the scheduler's :class:`ExtendedHandle`, then
    registers the controllers of a :class:`~interfaces.ControllerProvider` in
    ``handle.controllers`` and the routes of an :class:`~interfaces.APIServiceProvider` in
    ``handle.services`` (each plugin once). Wrapping an already wrapped factory returns it.
    """
    if factory.proxied:
        return factory
    inner = factory.new

    def new(args: _ArgsT, handle: handles.ExtendedHandle) -> interfaces.Plugin:
        plugin = inner(args, handle)
        if isinstance(plugin, interfaces.ControllerProvider):
            handle.controllers.register(plugin.name, controllers=plugin.new_controllers())
        if isinstance(plugin, interfaces.APIServiceProvider):
            handle.services.register(plugin.name, routes=plugin.routes())
        return plugin

    return dataclasses.replace(factory, new=new, proxied=True)


class Registry(collections.abc.Mapping[str, AnyFactory]):
    """Plugin factories by name. Duplicates are errors; nothing is global.

    ``retired`` maps the names of removed plugins to what a profile should say instead, so a
    profile still naming one is refused with that advice rather than as an unknown name.
    """

    def __init__(
        self,
        factories: collections.abc.Mapping[str, AnyFactory] | None = None,
        *,
        retired: collections.abc.Mapping[str, str] | None = None,
    ) -> None:
        self._factories: dict[str, AnyFactory] = {}
        self._retired = dict(retired or {})
        for name, factory in (factories or {}).items():
            self.register(name, factory=factory)

    def retired(self, name: str) -> str | None:
        """What to write instead of ``name``, a removed plugin no factory now answers to."""
        return None if name in self._factories else self._retired.get(name)

    def register(self, name: str, *, factory: AnyFactory) -> None:
        """Add ``factory`` under ``name``; a name already present is an error."""
        if name in self._factories:
            raise errors.RegistryError(f"a plugin named {name} already exists")
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        """Remove ``name``; an unknown name is an error."""
        if name not in self._factories:
            raise errors.RegistryError(f"no plugin named {name} exists")
        del self._factories[name]

    def merge(self, other: collections.abc.Mapping[str, AnyFactory]) -> None:
        """Add every factory of ``other`` (out-of-tree plugins); any duplicate is an error.

        Nothing is added when any name clashes, so a failed merge leaves the registry as it was.
        """
        clashes = sorted(name for name in other if name in self._factories)
        if clashes:
            raise errors.RegistryError(f"a plugin named {clashes[0]} already exists")
        for name, factory in other.items():
            self.register(name, factory=factory)

    def __getitem__(self, name: str) -> AnyFactory:
        return self._factories[name]

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories
