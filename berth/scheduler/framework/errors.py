"""Errors of the plugin framework.

Extension points report outcomes as statuses, never as exceptions; these are for mistakes in
configuration and wiring, found when a profile is loaded or plugins are built::

    FrameworkError
     ├── RegistryError      a duplicate or unknown plugin name in a Registry
     ├── ProfileError       a profile that does not validate (YAML, names, args, weights)
     └── NoSessionError     a session-only handle method called outside a session
"""

from __future__ import annotations

__all__ = ["FrameworkError", "NoSessionError", "ProfileError", "RegistryError"]


class FrameworkError(Exception):
    """Base of the framework's errors."""


class RegistryError(FrameworkError):
    """A plugin name is registered twice, or is not registered at all."""


class ProfileError(FrameworkError):
    """A profile is not valid; the message lists every problem with its path."""


class NoSessionError(FrameworkError):
    """A plugin asked the handle for session data while no session is open."""
