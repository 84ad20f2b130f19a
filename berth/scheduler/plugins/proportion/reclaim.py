"""The rules of reclaim and of preemption across queues: which promise lets a job take
capacity back (a guarantee, its fair share, or a drain that ran past ``drainPreemptSeconds``),
and which victims it may take (``can_reclaim``, ``reclaimable`` and ``preemptable`` hooks;
docs/fair-share.md)."""

from __future__ import annotations

import collections.abc
import enum
import math

from berth.scheduler.framework import jobs
from berth.scheduler.plugins.proportion import accounting
from berth.scheduler.plugins.proportion import admission as admission_
from berth.scheduler.plugins.proportion import args as arguments
from berth.scheduler.plugins.proportion import min_runtime as min_runtime_
from berth.scheduler.snapshot import pods

__all__ = ["ReclaimMode", "ReclaimRules", "reclaimed_reason"]

IntArray = accounting.IntArray


class ReclaimMode(enum.Enum):
    """Why a job may take capacity back from other queues."""

    GUARANTEE = "guarantee"  # its quorum fits within its queue's (or an ancestor's) guarantee
    FAIR_SHARE = "fair-share"  # its queue stays within its weighted fair share with it
    DRAIN = "drain"  # the nodes the starvation guard held for it drained past drainPreemptSeconds


def reclaimed_reason(*, queue: str, group: str, mode: ReclaimMode, guarantor: str | None) -> str:
    """What a pod evicted by reclaim is told: who took the room (``group``: the taker as
    people name it, :attr:`~berth.scheduler.snapshot.podgroups.PodGroupInfo.title`), and on
    which promise
    (``guarantor``: the queue whose guarantee covered the job, for
    :attr:`ReclaimMode.GUARANTEE`)."""
    taker = f"reclaimed by queue {queue} for {group}"
    if mode is ReclaimMode.GUARANTEE:
        whose = (
            "its guarantee"
            if guarantor in (None, queue)
            else f"the guarantee of parent queue {guarantor}"
        )
        return f"{taker}: within {whose}"
    if mode is ReclaimMode.DRAIN:
        return f"{taker}: the nodes held for it drained past drainPreemptSeconds"
    return f"{taker}: toward its fair share"


class ReclaimRules:
    """The reclaim and cross-queue preemption rules over the books (``books``); whether a
    queue is usable at all is admission's answer (``admission``); which nodes drained for a
    starving job past ``drainPreemptSeconds`` is the starvation guard's (``drained``).
    ``min_runtime_ends`` is the plugin's, kept across sessions."""

    def __init__(
        self,
        books: accounting.Accounting,
        *,
        admission: admission_.Admission,
        args: arguments.ProportionArgs,
        min_runtime_ends: min_runtime_.MinRuntime,
        drained: collections.abc.Callable[[jobs.Job], frozenset[str] | None],
    ) -> None:
        self.books = books
        self.drained = drained
        self.session = books.session
        self.admission = admission
        self.args = args
        self.min_runtime_ends = min_runtime_ends
        self._modes: dict[str, ReclaimMode | None] = {}
        self._min_runtimes: dict[str | None, int] = {}  # queue -> its minimum runtime, once asked
        # (job, victim queue, victim requests) -> the levels that move, or None: never a victim
        self._sides: dict[tuple[str, str, object], tuple[list[int], list[int]] | None] = {}
        # The same key and the books' count of moves -> whether the shares allow the eviction
        self._verdicts: dict[tuple[str, str, object, int], bool] = {}
        # job key -> the queue whose guarantee lets it reclaim
        self._guarantors: dict[str, str] = {}
        self._next_min_runtime_end: float | None = None  # next_min_runtime_end, once worked out

    def reclaim_mode(self, job: jobs.Job) -> ReclaimMode | None:
        """Whether (and on which promise) ``job`` may take capacity back from other queues:
        the nodes the starvation guard held for it drained past ``drainPreemptSeconds`` (then
        only what runs there may go, whatever its queue), else its quorum fits within the
        guarantee of its queue or an ancestor, else its queue stays within its fair share
        with it (the ancestors are checked per victim, below the level the two queues share:
        :meth:`reclaimable`)."""
        books = self.books
        key = job.key
        if key in self._modes:
            return self._modes[key]
        mode: ReclaimMode | None = None
        path = books.paths.get(job.queue)
        usable = (
            path is not None and self.admission.queue_problem(job.queue, running=True).is_success()
        )
        if usable and self.drained(job) is not None:
            mode = ReclaimMode.DRAIN
        elif path is not None and usable:
            need = books.quorum_need(job)
            for a in path:
                promised = books.honored[a] > 0
                if not (need[promised] > 0).any():
                    continue
                if (
                    books.allocated[a][promised] + need[promised] <= books.honored[a][promised]
                ).all():
                    mode = ReclaimMode.GUARANTEE
                    self._guarantors[key] = books.order[int(a)]
                    break
            if (
                mode is None
                and self.args.reclaim_to_fair_share
                and self._within_share(books.index[job.queue], need)
            ):
                mode = ReclaimMode.FAIR_SHARE
        self._modes[key] = mode
        return mode

    def can_reclaim(self, job: jobs.Job) -> bool:
        return self.reclaim_mode(job) is not None

    def eviction_reason(self, job: jobs.Job) -> str | None:
        """The reason the victims of ``job``'s reclaim carry (None: it may not reclaim)."""
        mode = self.reclaim_mode(job)
        if mode is None:
            return None
        return reclaimed_reason(
            queue=job.queue,
            group=job.group.title,
            mode=mode,
            guarantor=self._guarantors.get(job.key),
        )

    def _within_share(self, i: int, need: IntArray) -> bool:
        """Queue ``i`` plus ``need`` holds no more than its fair share of any resource the
        need asks for (``pods`` aside)."""
        books = self.books
        cols = (need > 0) & books.not_pods
        if not cols.any():
            return False
        return bool((books.allocated[i][cols] + need[cols] <= books.share[i][cols]).all())

    def _keeps_share(self, i: int, vec: IntArray) -> bool:
        """Queue ``i`` less ``vec`` still holds at least its whole fair share of one of the
        resources ``vec`` frees — its dominant share over them stays at 1 or more, so the
        eviction takes nothing it is entitled to (a resource it is entitled to none of but
        holds counts as above its share)."""
        books = self.books
        cols = (vec > 0) & books.not_pods
        after = books.allocated[i][cols] - vec[cols]
        share = books.share[i][cols]
        return bool((((after >= share) & (share > 0)) | ((share <= 0) & (after > 0))).any())

    def min_runtime(self, victim: pods.PodInfo) -> int:
        """Seconds ``victim`` must have run before fair-share reclaim may take it (its
        queue's, else the plugin's; asked of every candidate, so kept per queue)."""
        found = self._min_runtimes.get(victim.queue)
        if found is None:
            info = self.session.snapshot.queues.get(victim.queue) if victim.queue else None
            found = self.args.reclaim_min_runtime_seconds
            if info is not None and info.min_runtime_seconds is not None:
                found = info.min_runtime_seconds
            self._min_runtimes[victim.queue] = found
        return found

    def next_min_runtime_end(self) -> float:
        """The first time after now a running pod passes its minimum runtime and may be
        reclaimed (worked out once a session, from the plugin's
        :class:`~berth.scheduler.plugins.proportion.min_runtime.MinRuntime`; ``inf``: none)."""
        if self._next_min_runtime_end is None:
            self._next_min_runtime_end = self.min_runtime_ends.next_after(
                self.session.snapshot, min_runtime=self.min_runtime
            )
        return self._next_min_runtime_end

    def class_revisit_at(self, job: jobs.Job) -> float | None:
        """When time alone changes what this plugin says of every job shaped like ``job``: a
        running pod passes its minimum runtime and may be reclaimed. The head of a parked
        class wakes then, so that reclaim sees it (if it reclaims, what it frees wakes the
        rest). Only a job that may reclaim toward its fair share waits for that: the minimum
        runtime binds nothing else, and whether a job may reclaim at all does not change by
        time alone."""
        if self.reclaim_mode(job) is not ReclaimMode.FAIR_SHARE:
            return None
        found = self.next_min_runtime_end()
        return found if found < math.inf else None

    def reclaimable(self, job: jobs.Job, victim: pods.PodInfo) -> bool:
        books = self.books
        name = victim.queue
        if name is None:
            return False
        mode = self.reclaim_mode(job)
        if mode is ReclaimMode.DRAIN:
            return self._drains(job, victim)
        if mode is None or name == job.queue:
            return False
        if mode is ReclaimMode.FAIR_SHARE:
            if books.evictions >= self.args.reclaim_evictions_per_cycle:
                return False
            started = (
                victim.start_time if victim.start_time is not None else victim.creation_timestamp
            )
            if self.session.snapshot.now - started < self.min_runtime(victim):
                return False
        # A search asks about hundreds of victims of a few shapes: what depends only on the
        # job, the victim's queue and its requests is worked out once a session, and the
        # shares' verdict once per change to the books.
        key = (str(job.key), name, victim.requests)
        if key in self._sides:
            sides = self._sides[key]
        else:
            sides = self._sides[key] = self._sides_moving(job, victim)
        if sides is None:
            return False
        if mode is ReclaimMode.GUARANTEE:
            # Held more than its entitlement before its gang started going: the solver asks
            # member by member, and a gang goes whole or not at all.
            j = books.index[name]
            held = books.allocated[j]
            if victim.pod_group is not None and victim.pod_group in books.evicted_vec:
                held = held + books.evicted_vec[victim.pod_group]
            useful = (held > books.share[j]) & (books.vector(victim) > 0)
            return bool((useful & (books.quorum_need(job) > 0) & books.not_pods).any())
        judged = (*key, books.moves)
        verdict = self._verdicts.get(judged)
        if verdict is None:
            ours, theirs = sides
            need, vec = books.quorum_need(job), books.vector(victim)
            verdict = self._verdicts[judged] = all(
                self._within_share(a, need) for a in ours
            ) and all(self._keeps_share(a, vec) for a in theirs)
        return verdict

    def _drains(self, job: jobs.Job, victim: pods.PodInfo) -> bool:
        """Whether ``victim`` may go for ``job`` whose held nodes drained past
        ``drainPreemptSeconds``: it runs on one of them, is not the job's own, asks no
        higher priority, frees something the job asks for, belongs to a smaller job (by
        dominant share: a big gang takes back from small jobs, never from its peers), and
        its queue (with every ancestor the two queues do not share) is reclaimable. Shares
        are not asked: the guard chose the job, and the room, by them (and by its wait)."""
        nodes = self.drained(job)
        if nodes is None or victim.node_name not in nodes or victim.priority > job.priority:
            return False
        if victim.pod_group is not None and victim.pod_group == job.group.key:
            return False
        books = self.books
        name = str(victim.queue)
        if name not in books.index:
            return False
        vec, need = books.vector(victim), books.quorum_need(job)
        if not ((vec > 0) & (need > 0) & books.not_pods).any():
            return False
        if books.job_size(victim.pod_group, victim) >= books.dominant(need):
            return False  # a job as big as this one: taking it back would only swap them
        mine = books.rows[job.queue]
        tree = books.tree.nodes
        return all(tree[books.order[a]].reclaimable for a in books.rows[name] if a not in mine)

    def _sides_moving(
        self, job: jobs.Job, victim: pods.PodInfo
    ) -> tuple[list[int], list[int]] | None:
        """The levels a reclaim of ``victim`` for ``job`` moves — the job's side takes, the
        victim's gives, below the level both queues share (a common ancestor keeps its
        total) — or ``None`` when the victim may never go for the job: its queue is not
        reclaimable, or it frees nothing the job asks for."""
        books = self.books
        name = str(victim.queue)
        if name not in books.index or not books.tree.nodes[name].reclaimable:
            return None
        vec, need = books.vector(victim), books.quorum_need(job)
        if not ((vec > 0) & (need > 0) & books.not_pods).any():
            return None
        mine, yours = books.rows[job.queue], books.rows[name]
        # A queue that is not reclaimable protects its whole subtree from the outside (a
        # child saying otherwise does not open it); inside it, siblings still rebalance.
        if not all(books.tree.nodes[books.order[a]].reclaimable for a in yours if a not in mine):
            return None
        return [a for a in mine if a not in yours], [a for a in yours if a not in mine]

    def preempts_across_queues(self, job: jobs.Job) -> bool:
        """The job's queue lets its jobs preempt other queues' work (``preemptAcrossQueues``)."""
        info = self.session.snapshot.queues.get(job.queue)
        return info is not None and info.preempt_across_queues

    def preemptable(self, job: jobs.Job, victim: pods.PodInfo) -> bool:
        """Preemption inside a queue is the Priority plugin's business; across queues (the
        job's queue sets ``preemptAcrossQueues``) the victim's queue must hold more than its
        fair share of a resource the pod frees and keep its guarantee without it (it and
        its ancestors below the level the two queues share)."""
        books = self.books
        name = victim.queue
        if name is None or name == job.queue:
            return True
        info = self.session.snapshot.queues.get(job.queue)
        j = books.index.get(name)
        if info is None or not info.preempt_across_queues or j is None:
            return False
        vec = books.vector(victim)
        cols = (vec > 0) & books.not_pods
        mine = books.rows.get(job.queue, ())
        held = books.allocated[j]
        if victim.pod_group is not None and victim.pod_group in books.evicted_vec:
            held = held + books.evicted_vec[victim.pod_group]  # as before its gang started going
        if not (held[cols] > books.share[j][cols]).any():
            return False
        for a in books.rows[name]:
            if a in mine:
                continue
            honored = books.honored[a]
            kept = books.allocated[a] - vec >= honored
            if not kept[(vec > 0) & (honored > 0)].all():
                return False
        return True
