"""GpuSharing: shares of a GPU on the device plugin (KAI-Scheduler's annotations), and where
GPU pods go so that the fewest GPUs are stranded.

- **PreFilter**: a pod whose ``gpu-fraction`` / ``gpu-memory`` / ``gpu-fraction-num-devices``
  annotations cannot be honoured (0, 1.5, ``half``, both set, a share plus whole GPUs) waits,
  unschedulable and unresolvable, its reason (code ``Invalid``) naming the annotation
  (``details["annotation"]``); a ``gpu-memory`` above every GPU's memory likewise (code
  ``Unschedulable``). Nothing else is affected. Pods asking no GPU skip the plugin, as do
  whole-GPU pods while no device is shared (the node table counts them exactly then).
- **Filter**: a share fits a node with as many devices having its share left (devices already
  shared, or whole free ones); a whole-GPU pod needs as many devices no pod uses (a device
  some share uses is not free, although the ``nvidia.com/gpu`` column counts only the share).
  Failing rows are ``NotEnoughResources``.
- **Score** (PreScore skips pods asking no GPU): the profile's :class:`~.policies.Policy`;
  Berth's default is fragmentation gradient descent against the mix of pods seen arriving.
- **Reserve** picks the share's devices on the chosen node (the policy's choice), the session's
  event handlers count them on their devices as statements place, pipeline, evict and undo
  (a victim frees exactly its share on its devices; a share nominated where no device has
  room for it yet is held by the ``nvidia.com/gpu`` column alone, on no device), and
  **PreBind** records them on the pod (annotation ``runai-gpu``), carried by the binding.

The devices (:mod:`berth.scheduler.snapshot.gpudevices`) are built at session open from the
snapshot and dropped at close (R8). The ``nvidia.com/gpu`` charge of a share is already in the
pod's requests (:mod:`berth.scheduler.snapshot.gpushare`), so NodeResourcesFit, queue quota and
fair share count it in fractions of a GPU.
"""

from __future__ import annotations

import numpy as np

from berth.api import resources
from berth.scheduler.framework import (
    cyclestate,
    decisions,
    filtering,
    handles,
    interfaces,
    jobs,
    reasons,
    registries,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.plugins.gpu_sharing import fragmentation, policies
from berth.scheduler.snapshot import gpudevices, gpushare, nodetable, podconstraints, pods

__all__ = ["NAME", "GpuSharing", "GpuSharingArgs", "new"]

NAME = names.GPU_SHARING
WHOLE = gpushare.WHOLE


class GpuSharingArgs(registries.ArgsModel):
    """Arguments of GpuSharing."""

    policy: policies.Policy = policies.Policy.FRAGMENTATION_GRADIENT
    """How GPU placements are scored: ``FragmentationGradient`` (the default: the fewest GPUs
    stranded for the workload arriving), or the baselines ``BestFit``, ``Packing``,
    ``Random`` (docs/gpu.md)."""
    fragments: fragmentation.Measure = fragmentation.Measure.FILL
    """How FragmentationGradient counts what a node strands for the arriving mix: ``Fill``
    (Berth's: what copies of each shape cannot fill, cpu included) or ``Fit`` (the
    paper's: all of it where one does not fit, else devices with less than its share)."""


def _ask(pod: pods.PodInfo, devices: gpudevices.Devices) -> policies.Ask | None:
    """What ``pod`` asks of a GPU node; ``None`` for a pod asking no GPU."""
    cpu = pod.requests.get(resources.CPU, 0)
    share = pod.gpu_share
    if share is not None and share.problem is None:
        return policies.Ask(
            key=pod.key, share=share, whole=0, cpu=cpu, need=devices.per_device(share)
        )
    gpus = pod.requests.get(resources.GPU, 0)
    if gpus <= 0:
        return None
    return policies.Ask(
        key=pod.key,
        share=None,
        whole=-(-gpus // WHOLE),
        cpu=cpu,
        need=np.full(len(devices.count), WHOLE, dtype=np.int64),
    )


_RESERVED_SHARE = gpushare.Problem(
    annotation=gpushare.FRACTION_ANNOTATION,
    message=(
        "a Reservation holds whole GPUs: its template may not ask a share of one (annotations "
        f"{gpushare.FRACTION_ANNOTATION} / {gpushare.MEMORY_ANNOTATION}); reserve "
        f"{resources.GPU} and let owners share it"
    ),
)


def _invalid(problem: gpushare.Problem) -> statuses.Status:
    return statuses.new(
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        problem.message,
        reason_code=reasons.ReasonCode.INVALID,
        details={"annotation": problem.annotation},
    )


def _memory_problem(
    share: gpushare.ShareRequest, devices: gpudevices.Devices
) -> statuses.Status | None:
    """Why a ``gpu-memory`` share fits no device of the cluster (``None``: some device)."""
    largest = int(devices.memory.max(initial=0))
    if largest >= share.memory_mib:
        return None
    if largest == 0:
        message = (
            f"annotation {gpushare.MEMORY_ANNOTATION}: no GPU node says how much memory its "
            f"GPUs have (node label {gpushare.MEMORY_LABEL}, as GPU feature discovery sets it)"
        )
    else:
        message = (
            f"annotation {gpushare.MEMORY_ANNOTATION}: {share.memory_mib} MiB is more than any "
            f"GPU's memory (the most: {largest} MiB, node label {gpushare.MEMORY_LABEL})"
        )
    return statuses.new(
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        message,
        reason_code=reasons.ReasonCode.UNSCHEDULABLE,
        details={"annotation": gpushare.MEMORY_ANNOTATION},
    )


class _Session:
    """One session's devices and the device choices its statements made."""

    def __init__(
        self,
        session: sessions.Session,
        devices: gpudevices.Devices,
        args: GpuSharingArgs,
    ) -> None:
        self.session = session
        self.nodes = session.nodes
        self.devices = devices
        self.policy = args.policy
        self.fragments = args.fragments
        self.chosen: dict[str, gpudevices.Placement] = {}  # by Reserve, until counted
        self.released: dict[str, gpudevices.Placement] = {}  # victims: their eviction undone
        self._classes: fragmentation.Classes | None = None
        cpu = _column(self.nodes, resources.CPU)
        self.cpu_capacity = int(self.nodes.allocatable[:, cpu].max(initial=0)) if cpu >= 0 else 0
        self.gpu_capacity = int(devices.count.max(initial=0)) * WHOLE

    def classes(self) -> fragmentation.Classes:
        """The arriving mix over this session's nodes (built once)."""
        if self._classes is None:
            self._classes = fragmentation.classes_of(
                self.session.snapshot.gpu_mix,
                nodes=self.nodes,
                devices=self.devices,
                kind=self.fragments,
            )
        return self._classes

    def inputs(
        self,
        rows: np.ndarray[tuple[int], np.dtype[np.int64]],
        nodes: nodetable.NodeTable,
        *,
        counted: pods.PodInfo | None = None,
    ) -> policies.Inputs:
        """The state of ``rows`` for the policies. ``counted``: a pod ``nodes`` already counts
        on those rows (a statement placing it); it is left out, so the rows are as before."""
        gpu_back = counted.requests.get(resources.GPU, 0) if counted is not None else 0
        cpu_back = counted.requests.get(resources.CPU, 0) if counted is not None else 0
        cpu = _column(nodes, resources.CPU)
        if cpu >= 0:
            cpu_free = nodes.allocatable[rows, cpu] - nodes.requested[rows, cpu] + cpu_back
        else:
            cpu_free = np.zeros(len(rows), dtype=np.int64)
        return policies.Inputs(
            rows=rows,
            free=self.devices.free_matrix(nodes, counted=gpu_back)[rows],
            cpu_free=cpu_free,
            cpu_capacity=self.cpu_capacity,
            gpu_capacity=self.gpu_capacity,
        )

    def place_on(self, pod: pods.PodInfo, row: int) -> gpudevices.Placement | None:
        """The policy's devices for ``pod`` (a share) on ``row``, where the session's table
        already counts it; ``None`` when they do not fit."""
        share = pod.gpu_share
        assert share is not None
        charge = pod.requests.get(resources.GPU, 0)
        slots = self.devices.slots_for(row, share, self.nodes, counted=charge)
        ask = _ask(pod, self.devices)
        if slots is None or ask is None:
            return None
        inputs = self.inputs(np.array([row], dtype=np.int64), self.nodes, counted=pod)
        classes = self.classes() if self.policy is policies.Policy.FRAGMENTATION_GRADIENT else None
        chosen = policies.choose(self.policy, ask, inputs, slots=slots, classes=classes)
        per_device = self.devices.per_device_on(share, row)
        return gpudevices.Placement(row=row, slots=chosen, per_device=per_device, charge=charge)

    # Session event handlers -------------------------------------------------------------------
    def allocated(self, event: jobs.Event) -> None:
        pod = event.pod
        if pod.gpu_share is None or pod.gpu_share.problem is not None:
            return
        row = self.nodes.index.get(event.node)
        if row is None:
            return
        if pod.node_name is not None:
            # A running pod back on its node: its eviction undone. Statements undo newest
            # first, so its devices are as it left them: it goes back where it runs.
            placement = self.released.pop(pod.key, None)
        else:
            # Placed (Reserve chose its devices a moment ago) or pipelined (no Reserve): where
            # it fits now. A share nominated to a node with no room for it yet is held by the
            # GPU column alone: counted on devices that are not free, it would open them, and
            # a device opened is one a later share may join, although whole-GPU pods (or
            # other devices' shares) hold the node's every GPU.
            placement = self.chosen.pop(pod.key, None)
            if placement is None or placement.row != row:
                placement = self.place_on(pod, row)
        if placement is not None:
            self.devices.place(pod.key, placement)

    def deallocated(self, event: jobs.Event) -> None:
        released = self.devices.remove(event.pod.key)
        if released is not None and event.pod.node_name is not None:
            # Only a running pod (a victim) comes back as it was: a pending pod's devices are
            # chosen afresh whenever it is placed again, as others may have taken them since.
            self.released[event.pod.key] = released


def _column(nodes: nodetable.NodeTable, name: str) -> int:
    """The table's column of ``name``, -1 when it has none."""
    return nodes.column.get(name, -1)


class GpuSharing(
    interfaces.PreFilterPlugin,
    interfaces.FilterPlugin,
    interfaces.PreScorePlugin,
    interfaces.ScorePlugin,
    interfaces.ReservePlugin,
    interfaces.PreBindPlugin,
    interfaces.SessionPlugin,
    interfaces.ConstraintPlugin,
):
    """PreFilter, Filter, PreScore, Score, Reserve, PreBind; session event handlers."""

    name = NAME
    understands = frozenset({podconstraints.Field.GPU_SHARING})

    def __init__(self, args: GpuSharingArgs, handle: handles.ExtendedHandle | None = None) -> None:
        self._args = args
        self._policy = args.policy
        self._handle = handle
        self._state: _Session | None = None

    # Session ---------------------------------------------------------------------------------
    def on_session_open(self, session: sessions.Session) -> None:
        devices = gpudevices.build(
            session.nodes,
            labels=session.nodes.labels,
            shared=session.snapshot.shared_gpus,
        )
        if devices is None:
            self._state = None  # no node offers GPUs: nothing to share, nothing to score
            return
        state = self._state = _Session(session, devices, self._args)
        session.hooks.allocated.add(state.allocated, plugin=NAME)
        session.hooks.deallocated.add(state.deallocated, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        self._state = None

    # Filtering -------------------------------------------------------------------------------
    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        share = pod.gpu_share
        session = self._state
        if share is None and session is None:
            return statuses.SKIP  # the common case on a cluster without GPUs: first and cheap
        if share is not None and share.problem is not None:
            return _invalid(share.problem)
        if share is not None and pod.reserve:
            return _invalid(_RESERVED_SHARE)
        if session is None:
            return statuses.SKIP  # no GPU node: NodeResourcesFit says so for GPU pods
        if share is not None:
            if share.by_memory:
                problem = _memory_problem(share, session.devices)
                if problem is not None:
                    return problem
            return statuses.SUCCESS
        if pod.requests.get(resources.GPU, 0) > 0 and session.devices.any_open():
            return statuses.SUCCESS
        return statuses.SKIP

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        session = self._state
        if session is None:
            return filtering.passing(len(nodes))
        devices = session.devices
        share = pod.gpu_share
        if share is None:
            count = -(-pod.requests.get(resources.GPU, 0) // WHOLE)
            passed = devices.whole_free(nodes) >= count
            shared = devices.open_count() > 0
            return filtering.NodeFilter(
                passed=passed,
                reason_code=reasons.ReasonCode.NOT_ENOUGH_RESOURCES,
                explain=lambda: {
                    f"{count} whole GPU(s) not free (devices shared)": ~passed & shared,
                    f"Insufficient {resources.GPU}": ~passed & ~shared,
                },
            )
        passed = devices.fitting(share, nodes)
        return filtering.NodeFilter(
            passed=passed,
            reason_code=reasons.ReasonCode.NOT_ENOUGH_RESOURCES,
            explain=lambda: _explain(share, devices, passed),
        )

    # Scoring ---------------------------------------------------------------------------------
    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        session = self._state
        if session is None:
            return statuses.SKIP
        if _ask(pod, session.devices) is not None:
            return statuses.SUCCESS
        # A cpu-only pod: its cpu matters only where it may go to a GPU node (it can leave
        # GPUs there without the cpu to use them); Packing scores nothing for it.
        if self._policy is policies.Policy.PACKING:
            return statuses.SKIP
        if self._policy is policies.Policy.FRAGMENTATION_GRADIENT and not np.any(
            feasible & (session.devices.count > 0)
        ):
            return statuses.SKIP
        return statuses.SUCCESS

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        out = np.zeros(len(nodes), dtype=np.int64)
        session = self._state
        if session is None:
            return out
        devices = session.devices
        policy = self._policy
        fgd = policy is policies.Policy.FRAGMENTATION_GRADIENT
        classes = session.classes() if fgd else None
        ask = _ask(pod, devices)
        if ask is not None:
            rows = np.flatnonzero(feasible & (devices.count > 0)).astype(np.int64)
            if rows.size:
                out[rows] = policies.scores(
                    policy, ask, session.inputs(rows, nodes), classes=classes
                )
            return out
        # A cpu-only pod, scored over every feasible row; nodes without GPUs strand none.
        ask = policies.Ask(
            key=pod.key,
            share=None,
            whole=0,
            cpu=pod.requests.get(resources.CPU, 0),
            need=np.full(len(nodes), WHOLE, dtype=np.int64),
        )
        rows = np.flatnonzero(feasible).astype(np.int64)
        if not fgd:
            out[rows] = policies.scores(policy, ask, session.inputs(rows, nodes), classes=None)
            return out
        assert classes is not None
        on_gpus = devices.count[rows] > 0
        gain = np.zeros(len(rows), dtype=np.int64)
        left = np.zeros(len(rows), dtype=np.int64)
        gpu_rows = rows[on_gpus]
        inputs = session.inputs(gpu_rows, nodes)
        gain[on_gpus] = policies.gains(ask, inputs, classes)
        # Between nodes where its cpu strands no GPU: the fullest (no GPU left before cpu
        # nodes; then the least cpu left).
        left[on_gpus] = inputs.free.sum(axis=1)
        cpu = _column(nodes, resources.CPU)
        cpu_left = nodes.allocatable[rows, cpu] - nodes.requested[rows, cpu] - ask.cpu
        out[rows] = policies.ranked(gain, left, cpu_left)
        return out

    def score_extensions(self) -> None:
        return None

    # Reserve and binding ------------------------------------------------------------------------
    def reserve(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        session = self._state
        share = pod.gpu_share
        if session is None or share is None or share.problem is not None:
            return statuses.SUCCESS
        row = session.nodes.index.get(node)
        placement = session.place_on(pod, row) if row is not None else None
        if placement is None:
            return statuses.new(
                statuses.Code.UNSCHEDULABLE,
                f"no GPU of node {node} has {share.describe()} left",
                reason_code=reasons.ReasonCode.NOT_ENOUGH_RESOURCES,
            )
        session.chosen[pod.key] = placement
        return statuses.SUCCESS

    def unreserve(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> None:
        session = self._state
        if session is not None:
            session.chosen.pop(pod.key, None)

    def pre_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        session = self._state
        placement = session.devices.placements.get(pod.key) if session is not None else None
        if placement is None:
            return statuses.SUCCESS
        recorder.record(
            decisions.AnnotatePod(
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                annotations={gpushare.INDEX_ANNOTATION: gpushare.format_devices(placement.slots)},
            )
        )
        return statuses.SUCCESS


def _explain(
    share: gpushare.ShareRequest, devices: gpudevices.Devices, passed: filtering.BoolArray
) -> filtering.Reasons:
    need = devices.per_device(share)
    failed = ~passed
    unknown = failed & (devices.count > 0) & (devices.memory == 0) & (need < 0)
    small = failed & (devices.count > 0) & (devices.memory > 0) & (need < 0)
    full = failed & ~unknown & ~small
    out: dict[str, filtering.BoolArray] = {}
    if unknown.any():
        out[f"GPU memory unknown (node label {gpushare.MEMORY_LABEL})"] = unknown
    if small.any():
        out[f"GPU memory below {share.memory_mib} MiB"] = small
    if full.any():
        if share.devices == 1:
            out[f"no GPU with {share.amount} free"] = full
        else:
            out[f"fewer than {share.devices} GPUs with {share.amount} free"] = full
    return out


def new(args: GpuSharingArgs, handle: handles.ExtendedHandle) -> GpuSharing:
    """Build the plugin."""
    return GpuSharing(args, handle)
