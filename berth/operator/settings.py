"""The operator's settings: command-line flags, then ``BERTH_*`` environment, then config file.

``berth run`` builds one :class:`Settings` from its flags (only the flags actually given);
:func:`berth.operator.main.run` and everything it starts read their knobs from it. Sources,
highest precedence first:

1. keyword arguments (the flags of ``berth run``);
2. environment variables ``BERTH_<FIELD>``; nested fields use ``__``, e.g.
   ``BERTH_LEADER_ELECTION__LEASE_DURATION=20s``;
3. the YAML file named by ``--config`` / ``BERTH_CONFIG`` (the scheduler profile the Helm chart
   mounts): its top-level keys in the API's camelCase (``schedulerName``, ``httpPort``,
   ``leaderElection: {leaseDuration: 15s}``). Keys that are not settings (``actions``,
   ``plugins``, ...) belong to the profile and are left to its loader, the way one
   KubeSchedulerConfiguration file carries both process settings and profiles
   (:meth:`Settings.profile_document` hands the profile its part);
4. the defaults below.

Durations accept seconds as a number or a Go-style duration string (``15s``, ``1m30s``).
"""

from __future__ import annotations

import enum
import os
import pathlib
import socket
import typing
import uuid

import pydantic
import pydantic.alias_generators
import pydantic_settings
import yaml

from berth.api import durations
from berth.api import errors as api_errors
from berth.operator import errors
from berth.util import logging as berth_logging
from berth.workloads import interop

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "AdmissionSettings",
    "AutoscalingSettings",
    "LeaderElectionSettings",
    "Mode",
    "Settings",
    "default_identity",
    "default_namespace",
]

DEFAULT_SCHEDULER_NAME = "berth-scheduler"

# Where Kubernetes mounts the pod's service-account namespace (in-cluster configuration).
_SERVICE_ACCOUNT_NAMESPACE = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _to_seconds(value: object) -> object:
    """Accept ``15``, ``15.0``, ``"15"`` or ``"15s"``; leave anything else to pydantic."""
    if isinstance(value, str) and value.strip() and not _is_number(value):
        try:
            return durations.parse_ms(value.strip()) / 1000
        except api_errors.DurationError as exc:
            raise ValueError(str(exc)) from None
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


Seconds = typing.Annotated[float, pydantic.BeforeValidator(_to_seconds), pydantic.Field(gt=0)]
"""A positive duration in seconds, given as a number or a Go-style duration string."""


def default_identity() -> str:
    """This replica's leader-election identity: the pod's name, else hostname and a UUID.

    The pod name (``POD_NAME``, set by the chart through the downward API) is what
    ``kubectl get lease`` readers recognise. Outside a pod, a random suffix keeps two processes
    on one host distinct: were they equal, each would take the other's lease as its own.
    """
    pod_name = os.environ.get("POD_NAME", "").strip()
    if pod_name:
        return pod_name
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def default_namespace() -> str:
    """The namespace Berth runs in: ``POD_NAMESPACE``, the service account's, else ``default``."""
    pod_namespace = os.environ.get("POD_NAMESPACE", "").strip()
    if pod_namespace:
        return pod_namespace
    try:
        return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


class Mode(enum.StrEnum):
    """What Berth does with the placements it decides (docs/architecture.md)."""

    SCHEDULER = "scheduler"  # Berth binds pods whose schedulerName is Berth's.
    ADMISSION = "admission"  # Berth admits (ungates and pins) pods; kube-scheduler binds them.


class LeaderElectionSettings(pydantic.BaseModel):
    """How replicas elect the one that schedules (a ``coordination.k8s.io/v1`` Lease)."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Campaign for the Lease before scheduling. The default is on because the chart runs two
    replicas; turn it off only for a single replica (two unelected replicas double-bind)."""

    lease_name: str = "berth-scheduler"
    """Name of the Lease object in :attr:`Settings.namespace`. The default matches the
    scheduler name so that ``kubectl get lease`` shows at a glance whose lock it is."""

    lease_duration: Seconds = 15.0
    """Measured in seconds. How long followers wait, after the last renewal they observed,
    before taking the Lease over. The default is kube-scheduler's 15 s: a crashed leader is
    replaced within 15 s while an API-server hiccup of a few seconds does not cause a failover."""

    renew_deadline: Seconds = 10.0
    """Measured in seconds. How long the leader keeps trying to renew before it gives up,
    stops scheduling and exits. The default is kube-scheduler's 10 s; it must be shorter than
    :attr:`lease_duration` so the old leader has stopped before anybody may take over."""

    retry_period: Seconds = 2.0
    """Measured in seconds. The interval between attempts to acquire or renew. The default is
    kube-scheduler's 2 s: five renewals fit in the renew deadline."""

    identity: str = pydantic.Field(default_factory=default_identity, min_length=1)
    """This replica's name in the Lease's ``holderIdentity``. The default is the pod's name
    (``POD_NAME``), or the hostname plus a UUID outside a pod."""

    @pydantic.model_validator(mode="after")
    def _check_timings(self) -> LeaderElectionSettings:
        # The same rules as client-go's NewLeaderElector: without them a leader could still be
        # scheduling when a follower takes over, or give up between two retries.
        if self.renew_deadline >= self.lease_duration:
            raise ValueError(
                f"renewDeadline ({self.renew_deadline}s) must be shorter than "
                f"leaseDuration ({self.lease_duration}s)"
            )
        if self.renew_deadline <= 1.2 * self.retry_period:
            raise ValueError(
                f"renewDeadline ({self.renew_deadline}s) must be longer than 1.2 x "
                f"retryPeriod ({self.retry_period}s)"
            )
        return self


class AdmissionSettings(pydantic.BaseModel):
    """Admission mode: the mutating webhook that gates Berth's pods, and admitted pods' timeout."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    webhook: bool = True
    """Serve the mutating admission webhook (every replica, in admission mode). On by default;
    turn it off when pods carry the gate ``scheduling.berth.io/admission`` in their templates."""

    queue_access: bool = False
    """Serve the webhook in scheduler mode too, only to refuse pods naming a queue their
    namespace may not use (in admission mode the webhook always checks). Off by default: the
    chart turns it on with ``queueAccess.webhook``; without it, such pods wait, saying why."""

    webhook_host: str = "0.0.0.0"
    """Address the webhook listens on. Every interface by default: the API server calls the
    pod's IP through the chart's Service."""

    webhook_port: int = pydantic.Field(default=9443, ge=0, le=65535)
    """TCP port of the webhook (HTTPS); 0 picks a free one (tests). The default, 9443, is the
    conventional unprivileged webhook port the chart's Service targets."""

    cert_file: pathlib.Path = pathlib.Path("/var/run/berth/admission/tls.crt")
    """PEM certificate (chain) the webhook serves. The default is where the chart mounts the
    ``tls.crt`` of its Secret."""

    key_file: pathlib.Path = pathlib.Path("/var/run/berth/admission/tls.key")
    """PEM private key of :attr:`cert_file`; the default is the chart's mount of ``tls.key``."""

    bind_timeout: Seconds = 60.0
    """Measured in seconds. How long a pod Berth admitted (pinned and ungated) may stay unbound
    before the allocation is rejected and the pod recreated gated. The default leaves
    kube-scheduler a minute, far above its usual milliseconds, so that only a pod that cannot
    go where Berth put it is rejected."""


class AutoscalingSettings(pydantic.BaseModel):
    """What Berth does for cluster autoscalers (Karpenter, Cluster Autoscaler;
    docs/autoscaling.md)."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    protect_nodes: bool = True
    """Give a node holding an Available Reservation, a nominated gang or an admission pin the
    autoscalers' scale-down opt-outs (``karpenter.sh/do-not-disrupt``,
    ``cluster-autoscaler.kubernetes.io/scale-down-disabled``) while it holds them, and remove
    them after (needs ``nodes: get, patch``). On by default: such nodes look empty to an
    autoscaler, which would remove them."""

    capacity_requests: bool = True
    """Ask the cluster's autoscaler for capacity with ProvisioningRequests or CapacityBuffers
    (``autoscaling.x-k8s.io``) where they are served: for gated gangs in admission mode, for
    gangs of queues that name a ProvisioningRequest class, for Reservations that ask for a
    buffer (needs ``podtemplates``, ``provisioningrequests`` and ``capacitybuffers``); and say
    on each group waiting for capacity what the autoscaler did for it (the PodGroup's
    ``ScaleUp`` condition, from Karpenter's and Cluster Autoscaler's Events on its pods: needs
    ``events: list``). On by default; nothing is created where neither API is served."""

    answer_timeout: Seconds = 120.0
    """Measured in seconds. How long a capacity request may go without any condition from an
    autoscaler, or a gang's ``Unschedulable`` pods without any autoscaler acting on them (on a
    cluster serving an autoscaler's API), before the group's reason (``NoAutoscalerActed``,
    and a Warning Event) says that none has. The default, two minutes, is well above the
    seconds an autoscaler takes to act (Karpenter batches pods for at most ten)."""

    retry_after: Seconds = 60.0
    """Measured in seconds. How long a refused capacity request stays (its status is the
    record) before it is made again; doubled after each refusal in a row, up to 15 minutes.
    The default is a minute, Kueue's first ProvisioningRequest retry."""

    hold_backoff: Seconds = 300.0
    """Measured in seconds. How long a gang the autoscaler said it cannot fit is first kept
    off its list (its pods wait as ``AutoscalerCannotFit``, or its requests are withdrawn)
    before it is shown to the autoscaler again; doubled each time the autoscaler says so again,
    up to :attr:`hold_backoff_max`. The default, five minutes, is how long Karpenter waits
    before it repeats its ``FailedScheduling`` Event for a pod: a shorter hold shows the pods
    again before Karpenter may answer, and they wait on its old answer."""

    hold_backoff_max: Seconds = 3600.0
    """Measured in seconds. The longest such hold: a NodePool changed meanwhile is noticed
    within it. The default is an hour."""

    @pydantic.model_validator(mode="after")
    def _check_holds(self) -> AutoscalingSettings:
        if self.hold_backoff > self.hold_backoff_max:
            raise ValueError(
                f"holdBackoff ({self.hold_backoff}s) must not be longer than "
                f"holdBackoffMax ({self.hold_backoff_max}s)"
            )
        return self


class Settings(pydantic_settings.BaseSettings):
    """Everything ``berth run`` can be told; see the module docstring for the sources."""

    model_config = pydantic_settings.SettingsConfigDict(
        env_prefix="BERTH_",
        env_nested_delimiter="__",
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )

    kubeconfig: pathlib.Path | None = None
    """Path of a kubeconfig file. The default (none) means ``KUBECONFIG`` or
    ``~/.kube/config`` when present, else the in-cluster service account, as kubectl does."""

    config: pathlib.Path | None = None
    """Path of the YAML configuration (scheduler profile) file. None by default: the built-in
    profile, and only flags, environment and defaults for these settings."""

    namespace: str = pydantic.Field(default_factory=default_namespace, min_length=1)
    """The namespace Berth runs in, which holds its Lease. The default is the pod's own
    namespace (``POD_NAMESPACE`` or the service account's), else ``default``."""

    scheduler_name: str = pydantic.Field(default=DEFAULT_SCHEDULER_NAME, min_length=1)
    """Pods whose ``spec.schedulerName`` equals this are Berth's. The default,
    ``berth-scheduler``, is what the examples and the chart use."""

    mode: Mode = Mode.SCHEDULER
    """``scheduler`` (Berth binds) or ``admission`` (Berth ungates, kube-scheduler binds). The
    default is ``scheduler``: admission mode is for clusters that must keep kube-scheduler."""

    admission: AdmissionSettings = pydantic.Field(default_factory=AdmissionSettings)
    """Admission mode's webhook and timeout; see :class:`AdmissionSettings` for each field and
    its default (the chart's mount paths)."""

    http_host: str = "0.0.0.0"
    """Address the HTTP server (probes, metrics, debug API) listens on. The default is every
    interface, because the kubelet's probes and Prometheus connect to the pod's IP (which is
    why ``http_authorization`` is on by default)."""

    http_port: int = pydantic.Field(default=8080, ge=0, le=65535)
    """TCP port of the HTTP server; 0 picks a free one (tests). The default, 8080, is the
    chart's container port and needs no privilege."""

    http_authorization: bool = True
    """Serve everything but the probes only to callers the Kubernetes API authenticates
    (TokenReview) and authorizes (SubjectAccessReview) for the path and verb, as
    kube-scheduler's secure port does: an anonymous request gets 401. On by default, since the
    server lists every tenant's pods per node and listens on every interface; ``berth up``
    turns it off for its local cluster (on loopback, where the embedded API server reviews no
    tokens), and so may a test."""

    log_level: str = "info"
    """A level name (``debug`` .. ``critical``) or klog verbosity (``0``..``10``, ``4`` and
    up is debug). The default, ``info``, logs decisions and leadership changes, not requests."""

    enable_debug_api: bool = False
    """Serve ``POST /debug/flags/s`` and ``POST /debug/flags/v``. Off by default: they change
    the process's behaviour, so an operator must ask for them."""

    period: Seconds = 1.0
    """Measured in seconds. The longest the scheduling loop sleeps between cycles when nothing
    changes (changes wake it at once). The default, 1 s, is kube-batch's schedule period:
    backoffs and timeouts are noticed within a second without cycling idly."""

    queueing_hints: bool = True
    """Whether work that cannot fit waits, untried, for an event that could change that (a
    node or queue change, a pod ending, its group edited...; kube-scheduler's queueing hints,
    docs/scheduler.md) and a cycle with nothing new repeats the last one's reasons without
    trying again. On by default: a cycle costs what changed, not the backlog. Off
    (``BERTH_QUEUEING_HINTS=false``), every cycle tries every pending group, as a check when a
    group seems to wait for nothing."""

    queueing_hints_revisit: Seconds = 60.0
    """Measured in seconds. With :attr:`queueing_hints`, the longest a class of work that
    could not fit waits untried when no event wakes it: its first group is tried again, and
    the rest follow when it fits (kube-scheduler flushes its unschedulable pods after five
    minutes). The default, a minute, is how often a waiting pod's ``FailedScheduling`` Event
    counts a repeat: the first waiting pod of a shape shows a scheduling attempt a minute,
    while the cycles in between cost what changed."""

    placements_per_cycle: int = pydantic.Field(default=500, ge=0)
    """The most pods one scheduling cycle places before the next cycle, at once, places the
    rest (a gang is never split; ``0``: no limit). With thousands of pods pending at once (a
    burst, a restart), the first bindings then go out while the rest is placed, not after
    all of them: the API server binds at its pace from the first moment. The default, 500,
    takes a cycle a few tenths of a second at 5000 nodes, less than the API server needs to
    bind them."""

    bind_timeout: Seconds = 10.0
    """Measured in seconds. How long one binding request may take before it is retried. The
    default is generous: a slow binding is retried for the same node, never elsewhere."""

    bind_concurrency: int = pydantic.Field(default=64, ge=1, le=1024)
    """Binding requests in flight at once. The default, 64, keeps a burst of thousands of pods
    binding at hundreds per second without swamping the API server."""

    reservation_retention: Seconds = 24 * 3600.0
    """Measured in seconds. How long an ended Reservation (``Succeeded``, ``Expired``,
    ``Failed``) is kept before the Reservation controller deletes it. The default, a day (24 h,
    as Koordinator's collector), leaves time to read what happened (``kubectl get resv``) while
    finished reservations do not pile up."""

    admit_plain_pods: bool = True
    """Whether Berth's pods with neither a PodGroup nor a queue (nor a group derived from their
    owners) are charged to a queue as groups of one (quota, fair share, reclaim): their
    namespace's default queue (label ``scheduling.berth.io/default-queue``), else ``default``
    — Kueue's ``manageJobsWithoutQueueName``. On by default: no pod bypasses quota because it
    carries no label. Off, such pods of a namespace that names no default queue bypass queues
    and quota and are placed as kube-scheduler would; a namespace's default queue still takes
    its pods."""

    group_by_owner: bool = True
    """Whether Berth's pods with owners and no group get a group derived from their owners
    (a Job's parallelism, a JobSet's replicated Jobs, a PyTorchJob's replicas...; see
    docs/workloads.md) before they are scheduled. On by default: a workload's pods start
    together, as their owner's spec says they run, without anyone writing a PodGroup."""

    gpu_reservation_pods: bool = True
    """Keep each GPU that pods share (KAI-Scheduler's ``gpu-fraction`` / ``gpu-memory``) with a
    reservation pod in ``runai-reservation``, as KAI-Scheduler does, so the device plugin gives
    its device to no whole-GPU pod (needs ``pods: create, delete`` there; docs/gpu.md). On by
    default: without it, a whole-GPU pod of another scheduler can get a shared device."""

    interop_scheduler_plugins: bool = True
    """Whether Berth honours scheduler-plugins PodGroups (``scheduling.x-k8s.io/v1alpha1``,
    pods labelled ``scheduling.x-k8s.io/pod-group``) where the API server serves them: the gang
    objects the Kubeflow, MPI and Spark operators and KubeRay write when told to use a gang
    scheduler. On by default: without the CRD it costs one discovery request a minute."""

    interop_volcano: bool = True
    """Whether Berth honours Volcano PodGroups (``scheduling.volcano.sh/v1beta1``, pods
    annotated ``scheduling.k8s.io/group-name``) where the API server serves them. On by
    default, for the same reason."""

    interop_scheduler_plugins_pods: bool = False
    """Whether Berth also schedules the pods whose ``spec.schedulerName`` is
    ``scheduler-plugins-scheduler`` (scheduler-plugins' second scheduler), as its own, when
    :attr:`interop_scheduler_plugins` is on: a cluster moving from scheduler-plugins keeps its
    manifests. Off by default: where scheduler-plugins still runs, both would bind those pods."""

    interop_volcano_pods: bool = False
    """Whether Berth also schedules the pods whose ``spec.schedulerName`` is ``volcano``, as its
    own, when :attr:`interop_volcano` is on: a cluster moving from Volcano need not edit every
    pod. Off by default: where Volcano still runs, both would bind those pods."""

    interop_workload_api: bool = True
    """Whether Berth honours Kubernetes' own gangs where the API server serves them (found by
    discovery): 1.36's PodGroups (``scheduling.k8s.io/v1alpha2``, pods with
    ``spec.schedulingGroup``) and 1.35's Workloads (``scheduling.k8s.io/v1alpha1``, pods with
    ``spec.workloadRef``). On by default, for the same reason."""

    eviction_wait: Seconds = 30.0
    """Measured in seconds. How long a preemptor's binding waits for the victims evicted from
    its node in the same cycle to be gone (deleted, or Succeeded/Failed) before it is given up
    and the pod retried by a later cycle. Binding at once would let the kubelet see the
    preemptor while the victims still hold the node and fail it ``OutOf<resource>``. The
    default, 30 s, is Kubernetes' default termination grace period: victims that honour it are
    gone by then."""

    shutdown_timeout: Seconds = 10.0
    """Measured in seconds. How long graceful shutdown waits for each leader-only component to
    stop before abandoning it. The default fits in Kubernetes' 30 s termination grace period
    together with releasing the Lease."""

    leader_election: LeaderElectionSettings = pydantic.Field(default_factory=LeaderElectionSettings)
    """Leader election; see :class:`LeaderElectionSettings` for each field and its default."""

    autoscaling: AutoscalingSettings = pydantic.Field(default_factory=AutoscalingSettings)
    """What Berth does for cluster autoscalers; see :class:`AutoscalingSettings` for each field
    and its default."""

    @property
    def claimed_scheduler_names(self) -> tuple[str, ...]:
        """The other schedulers' names whose pods Berth schedules as its own (besides
        :attr:`scheduler_name`): what :attr:`interop_volcano_pods` and
        :attr:`interop_scheduler_plugins_pods` turn on, each with its interop."""
        claimed = (
            (
                interop.SCHEDULER_PLUGINS,
                self.interop_scheduler_plugins and self.interop_scheduler_plugins_pods,
            ),
            (interop.VOLCANO, self.interop_volcano and self.interop_volcano_pods),
        )
        return tuple(
            flavor.scheduler_name
            for flavor, on in claimed
            if on and flavor.scheduler_name and flavor.scheduler_name != self.scheduler_name
        )

    # Untyped: a scheduler profile document, the user's YAML (plugin args of any shape).
    def profile_document(self) -> dict[str, typing.Any]:
        """The scheduler profile part of the config file, for the profile loader.

        The file's keys that are not settings, plus ``schedulerName`` as these settings decided
        it (a flag or the environment may override the file's). Empty keys without a file.
        """
        document = read_config_file(self.config) if self.config is not None else {}
        fields = type(self).model_fields
        profile = {
            key: value
            for key, value in document.items()
            if pydantic.alias_generators.to_snake(str(key)) not in fields
        }
        profile["schedulerName"] = self.scheduler_name
        return profile

    @pydantic.field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        try:
            berth_logging.parse_level(value)
        except berth_logging.LevelError as exc:
            raise ValueError(str(exc)) from None
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[pydantic_settings.BaseSettings],
        init_settings: pydantic_settings.PydanticBaseSettingsSource,
        env_settings: pydantic_settings.PydanticBaseSettingsSource,
        dotenv_settings: pydantic_settings.PydanticBaseSettingsSource,
        file_secret_settings: pydantic_settings.PydanticBaseSettingsSource,
    ) -> tuple[pydantic_settings.PydanticBaseSettingsSource, ...]:
        # No dotenv or secrets directory: a pod gets its settings from flags and environment.
        return init_settings, env_settings, ConfigFileSource(settings_cls)


class ConfigFileSource(pydantic_settings.PydanticBaseSettingsSource):
    """Reads settings from the YAML file that the higher-precedence sources name as ``config``.

    It runs after the flags and environment sources, so their merged state already says which
    file to read. Only keys naming a setting are taken (camelCase, nested for
    ``leaderElection``); the rest of the file is the scheduler profile's.
    """

    def get_field_value(
        self, field: pydantic.fields.FieldInfo, field_name: str
    ) -> tuple[typing.Any, str, bool]:
        # Unused: __call__ reads the whole file at once.
        return None, field_name, False

    # Untyped: the user's configuration document (YAML of any shape until pydantic reads it).
    def __call__(self) -> dict[str, typing.Any]:
        path = self.current_state.get("config")
        if path is None:
            return {}
        document = read_config_file(pathlib.Path(path))
        return _settings_keys(document, self.settings_cls.model_fields)


# Untyped: the user's configuration file, YAML of any shape until pydantic validates it.
def read_config_file(path: pathlib.Path) -> dict[str, typing.Any]:
    """The configuration file's top-level mapping; :class:`ConfigFileError` if there is none."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise errors.ConfigFileError(f"config file {path}: {exc.strerror or exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise errors.ConfigFileError(f"config file {path}: not valid YAML: {exc}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        kind = type(document).__name__
        raise errors.ConfigFileError(f"config file {path}: expected a mapping, got a {kind}")
    return document


# Untyped: the user's configuration document, before pydantic validates it.
def _settings_keys(
    document: dict[str, typing.Any], fields: dict[str, pydantic.fields.FieldInfo]
) -> dict[str, typing.Any]:
    """The file's keys that name settings, in snake_case, recursing into nested settings."""
    # Untyped: settings of every type, handed to pydantic to validate.
    values: dict[str, typing.Any] = {}
    for key, value in document.items():
        name = pydantic.alias_generators.to_snake(str(key))
        # The file cannot name itself; a "config" key there would belong to the profile.
        if name not in fields or name == "config":
            continue
        nested = fields[name].annotation
        is_model = isinstance(nested, type) and issubclass(nested, pydantic.BaseModel)
        if isinstance(value, dict) and is_model:
            nested_fields = typing.cast(type[pydantic.BaseModel], nested).model_fields
            value = _settings_keys(value, nested_fields) | {
                # Unknown nested keys are passed on so that validation names the typo.
                k: v
                for k, v in value.items()
                if pydantic.alias_generators.to_snake(str(k)) not in nested_fields
            }
        values[name] = value
    return values
