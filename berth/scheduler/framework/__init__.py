"""The plugin API: everything a plugin (in-tree or out-of-tree) may use, by name.

Statuses and cycle state, the extension-point protocols, vectorised node filters, sessions
with their typed callbacks, statements, decisions, registries, handles and profiles, and the
snapshot types the extension points receive (PodInfo, NodeTable, ...). Plugin
authors import ``berth.scheduler.framework`` and nothing else of Berth's scheduler (R2); the
names below are the promise, guarded by ``tests/scheduler/framework/test_exported_members.py``.
In-tree code imports the modules (``from berth.scheduler.framework import statuses``, R3).
"""

# isort: skip_file
from __future__ import annotations

from berth.scheduler.framework.reasons import Reason, ReasonCode
from berth.scheduler.framework.reasons import new as new_reason
from berth.scheduler.framework.statuses import SKIP, SUCCESS, Code, Status
from berth.scheduler.framework.statuses import new as new_status
from berth.scheduler.framework.errors import (
    FrameworkError,
    NoSessionError,
    ProfileError,
    RegistryError,
)
from berth.scheduler.framework.cyclestate import CycleState, StateData, StateKey
from berth.scheduler.framework.filtering import BoolArray, NodeFilter, Reasons
from berth.scheduler.framework.decisions import (
    AllocateReservation,
    AnnotatePod,
    BindPod,
    CycleResult,
    Decision,
    DecisionRecorder,
    EndReservation,
    ExceedExecutionTime,
    EvictPod,
    MarkPending,
    NominatePod,
    QueueStatusSummary,
    SetReservationAvailable,
    Subject,
    Unschedulable,
)
from berth.scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Action,
    APIServiceProvider,
    BindPlugin,
    Controller,
    ControllerProvider,
    FilterHook,
    FilterPlugin,
    JSONValue,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterHook,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    Route,
    RouteRequest,
    ScoreArray,
    ScoreExtensions,
    ScoreHook,
    ScorePlugin,
    SessionPlugin,
    StaticFilterPlugin,
)
from berth.scheduler.framework.handles import ControllerRegistry, ExtendedHandle, ServiceRegistry
from berth.scheduler.framework.registries import (
    NoArgs,
    PluginFactory,
    Registry,
    plugin_factory_proxy,
)
from berth.scheduler.framework.profiles import PluginConfig, Profile, ResolvedProfile
from berth.scheduler.framework.profiles import load as load_profile
from berth.scheduler.framework.profiles import resolve as resolve_profile
from berth.scheduler.framework.hooks import (
    AllAgree,
    AllTrue,
    AnyTrue,
    Events,
    FirstWins,
    NodePredicates,
    NodeScores,
    Ordering,
)
from berth.scheduler.framework.jobs import Event, Job
from berth.scheduler.framework.runtime import Attempt, Framework
from berth.scheduler.framework.statements import Statement, StatementError
from berth.scheduler.framework.sessions import Session, SessionHooks, close_session, open_session

# The snapshot types every extension point receives, so plugins need no other import.
from berth.scheduler.snapshot.nodes import NodeInfo
from berth.scheduler.snapshot.nodetable import NodeTable
from berth.scheduler.snapshot.podgroups import PodGroupInfo
from berth.scheduler.snapshot.pods import PodInfo
from berth.scheduler.snapshot.queues import QueueInfo
from berth.scheduler.snapshot.reservations import ReservationInfo
from berth.scheduler.snapshot.snapshots import Snapshot

__all__ = [
    "APIServiceProvider",
    "Action",
    "AllAgree",
    "AllTrue",
    "AllocateReservation",
    "AnnotatePod",
    "AnyTrue",
    "Attempt",
    "BindPlugin",
    "BindPod",
    "BoolArray",
    "Code",
    "Controller",
    "ControllerProvider",
    "ControllerRegistry",
    "CycleResult",
    "CycleState",
    "Decision",
    "DecisionRecorder",
    "EndReservation",
    "Event",
    "Events",
    "EvictPod",
    "ExceedExecutionTime",
    "ExtendedHandle",
    "FilterHook",
    "FilterPlugin",
    "FirstWins",
    "Framework",
    "FrameworkError",
    "JSONValue",
    "Job",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "MarkPending",
    "NoArgs",
    "NoSessionError",
    "NodeFilter",
    "NodeInfo",
    "NodePredicates",
    "NodeScores",
    "NodeTable",
    "NominatePod",
    "Ordering",
    "PermitPlugin",
    "Plugin",
    "PluginConfig",
    "PluginFactory",
    "PodGroupInfo",
    "PodInfo",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterHook",
    "PreFilterPlugin",
    "PreScorePlugin",
    "Profile",
    "ProfileError",
    "QueueInfo",
    "QueueSortPlugin",
    "QueueStatusSummary",
    "Reason",
    "ReasonCode",
    "Reasons",
    "Registry",
    "RegistryError",
    "ReservationInfo",
    "ReservePlugin",
    "ResolvedProfile",
    "Route",
    "RouteRequest",
    "SKIP",
    "SUCCESS",
    "ScoreArray",
    "ScoreExtensions",
    "ScoreHook",
    "ScorePlugin",
    "ServiceRegistry",
    "Session",
    "SessionHooks",
    "SessionPlugin",
    "SetReservationAvailable",
    "Snapshot",
    "StateData",
    "StateKey",
    "Statement",
    "StatementError",
    "StaticFilterPlugin",
    "Status",
    "Subject",
    "Unschedulable",
    "close_session",
    "load_profile",
    "new_reason",
    "new_status",
    "open_session",
    "plugin_factory_proxy",
    "resolve_profile",
]
