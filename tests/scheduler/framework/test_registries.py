"""Registries: names to factories, the factory proxy, controller and service registries.

We test these aspects:
- a duplicate name is an error with Kubernetes' message; unregistering an unknown name too;
- ``merge`` adds out-of-tree factories, and a clash adds nothing at all;
- factories validate their args model (unknown keys refused by NoArgs);
- ``plugin_factory_proxy`` registers controllers and routes of the built plugin once, and
  wrapping twice is harmless;
- two routes with the same method and path in one plugin are an error.
"""

from __future__ import annotations

import asyncio
import collections.abc

import pydantic
import pytest

from berth.scheduler.framework import errors, handles, interfaces, registries
from berth.util import clocks


class Plain:
    name = "Plain"


class Tick:
    name = "tick"

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


class Capable(interfaces.ControllerProvider, interfaces.APIServiceProvider):
    name = "Capable"

    def __init__(self) -> None:
        self.built_controllers = 0

    def new_controllers(self) -> collections.abc.Sequence[interfaces.Controller]:
        self.built_controllers += 1
        return [Tick()]

    def routes(self) -> collections.abc.Sequence[interfaces.Route]:
        return [
            interfaces.Route(
                method="GET", path="things/{name}", handler=lambda r: dict(r.path_params)
            )
        ]


def factory_of(plugin: interfaces.Plugin) -> registries.AnyFactory:
    return registries.PluginFactory(new=lambda args, handle: plugin)


def test_duplicate_names_are_errors() -> None:
    registry = registries.Registry({"Plain": factory_of(Plain())})
    with pytest.raises(errors.RegistryError, match=r"^a plugin named Plain already exists$"):
        registry.register("Plain", factory=factory_of(Plain()))


def test_unregister_removes_and_refuses_unknown_names() -> None:
    registry = registries.Registry({"Plain": factory_of(Plain())})
    registry.unregister("Plain")
    assert "Plain" not in registry
    with pytest.raises(errors.RegistryError, match=r"^no plugin named Plain exists$"):
        registry.unregister("Plain")


def test_merge_adds_out_of_tree_factories() -> None:
    registry = registries.Registry({"Plain": factory_of(Plain())})
    registry.merge(registries.Registry({"Capable": factory_of(Capable())}))
    assert sorted(registry) == ["Capable", "Plain"]
    assert len(registry) == 2


def test_merge_with_a_clash_adds_nothing() -> None:
    registry = registries.Registry({"Plain": factory_of(Plain())})
    other = {"Capable": factory_of(Capable()), "Plain": factory_of(Plain())}
    with pytest.raises(errors.RegistryError, match="a plugin named Plain already exists"):
        registry.merge(other)
    assert list(registry) == ["Plain"]


class Args(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    size: int = 1


def test_factories_validate_their_args_model() -> None:
    factory = registries.PluginFactory(new=lambda args, handle: Plain(), args=Args)
    assert factory.validate_args({"size": 3}) == Args(size=3)
    assert factory.validate_args(None) == Args()
    with pytest.raises(pydantic.ValidationError):
        factory.validate_args({"size": "big"})
    with pytest.raises(pydantic.ValidationError):
        factory_of(Plain()).validate_args({"unexpected": 1})


def test_proxy_registers_controllers_and_routes_once() -> None:
    handle = handles.ExtendedHandle(clock=clocks.VirtualClock())
    plugin = Capable()
    proxied = registries.plugin_factory_proxy(factory_of(plugin))
    assert registries.plugin_factory_proxy(proxied) is proxied
    for _ in range(2):
        assert proxied.build(registries.NoArgs(), handle=handle) is plugin
    assert [(p, c.name) for p, c in handle.controllers.controllers()] == [("Capable", "tick")]
    assert plugin.built_controllers == 2  # asked every build, registered only the first time
    ((owner, route),) = handle.services.routes()
    assert owner == "Capable"
    assert (
        handles.ServiceRegistry.full_path(owner, route) == "/berth/v1/plugins/Capable/things/{name}"
    )
    assert route.handler(interfaces.RouteRequest(path_params={"name": "x"})) == {"name": "x"}


def test_proxy_leaves_plain_plugins_alone() -> None:
    handle = handles.ExtendedHandle(clock=clocks.VirtualClock())
    registries.plugin_factory_proxy(factory_of(Plain())).build(registries.NoArgs(), handle=handle)
    assert len(handle.controllers) == 0
    assert handle.services.routes() == []


def test_a_plugin_declaring_one_route_twice_is_an_error() -> None:
    route = interfaces.Route(method="GET", path="x", handler=lambda r: None)
    services = handles.ServiceRegistry()
    with pytest.raises(errors.RegistryError, match="declares the route GET x twice"):
        services.register("P", routes=[route, route])
