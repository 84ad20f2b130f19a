"""Proportion: hierarchical queues — guarantees, limits, weighted fair share by dominant
resource, the rules of reclaim, and the starvation guard (KAI's and Volcano's ``proportion``).

At session open it builds the queue tree (:mod:`.tree`) and every queue's entitlement
(:mod:`.shares`, tilted by recent usage when ``usageHalfLifeSeconds`` is set) from what
each queue runs (placed pods, by their queue) and waits for (pending pods) — totals the
cache keeps per queue (``Snapshot.queue_usage``), so opening costs the queues and the
pending jobs, not every running pod — (:mod:`.accounting`), then registers:

- **queue order**: the queues below the guarantee the tree honours them first (a queue's
  priority orders only what lies beyond guarantees, as KAI's over-quota priority); then the
  queue furthest through its entitlement last — its *ratio* is the largest
  ``allocated / entitlement`` over the resources it asks for (a resource it asks for but is
  entitled to none of counts as 1, reached) —, then higher ``priority``, then name;
- **job_valid**: a job whose queue is unusable (``queue team-a is invalid: parent queue org
  does not exist``), not a leaf (``queue team is not a leaf queue``) or closed (``queue team-a
  is closed``; a group that already runs may complete) waits with that reason, and so does
  one whose quorum exceeds a limit on its queue's path even with the queue empty (``can never
  fit: needs 16 cpu, queue limit 8``);
- **allocatable**, per pod: never above a ``limit``, the queue's or an ancestor's (``queue
  team-a at limit for cpu (64/64)``); and not once the queue holds its whole entitlement of a
  resource the pod asks for while another queue below its own still has jobs to try (``queue
  team-a at its fair share for cpu (10/10) while other queues wait``). A job may thus take its
  queue past its entitlement by one pod, so discrete pods never leave capacity idle, and the
  backfill action hands leftovers to queues held back once every queue had its turn;
- **queue_overused**: ratio at 1 or more while another queue below its own waits;
- **can_reclaim** / **reclaimable**: a job may take capacity back when its quorum fits
  within the guarantee of its queue or of an ancestor — the part the tree can honour, i.e.
  ``min(guaranteed, entitlement)``, which is all of it unless higher-priority siblings'
  guarantees already took the level's budget —; a victim must sit in another, ``reclaimable``
  queue holding more than its entitlement of a resource the job needs. A starving gang whose
  held nodes drained for ``drainPreemptSeconds`` may take back what runs there, whatever its
  queue: smaller jobs of lower or equal priority only (docs/scheduler.md);
- **job_starving** and **nominations** (the starvation guard): a job below quorum whose
  group was created ``starvationThresholdSeconds`` ago, while its queue has room left in its
  share (and limits), and enough of whose pods each fit on some node (a pod larger than
  every node waits for a node, not for room). For such jobs (at most :data:`MAX_HOLDERS`,
  the queue furthest below its share first, then priority, then age), each pod gets a node
  nominated: one where it fits once what runs there frees, preferring nodes where more of it
  fits already. Whatever is free on those nodes, up to the pod's size and the room left in
  its queue's share, is *held*: a node predicate keeps every other pod off it, so the room
  accumulates as running work finishes until the job fits whole; the backfill action
  pipelines the pods onto their nodes. The guard holds only room the queue is entitled to —
  it never overrides the weighted split — and capacity the job cannot use, or does not need,
  stays open. A Reservation booked for later (``startAt``) is drained for the same way from
  ``reservationDrainSeconds`` before it, backfilled only by work expected to end by then;
  **job_contending** names the first :data:`MAX_HOLDERS` starving jobs of each queue's line
  (whoever the guard holds for now or would next): the other starving jobs may wait parked;
- **preempts_across_queues** and **reclaim_reason**: whether a job's queue preempts other
  queues' work, and what the victims of its reclaim are told (on which promise);
- **allocate/deallocate handlers** keeping every queue's usage current while statements
  place, pipeline and evict (ancestors count their subtree).

At session close it publishes every queue's ``allocated``, ``requested``, ``fairShare``,
pending/running PodGroup counts, children and problem into ``session.queue_statuses`` (the
cycle result's ``queues``), and drops what it built (R8).

The package: :mod:`.args` (the profile's arguments), :mod:`.tree` (the queue tree and the
policies a child may not contradict), :mod:`.shares` (weighted DRF), :mod:`.decay`
(usage-decayed fair share), :mod:`.accounting` (a session's books and usage events, a value
the rule families hold), the rule families built over the books — :mod:`.admission`
(job_valid, allocatable), :mod:`.ordering` (queue order, jobOrder), :mod:`.reclaim`,
:mod:`.starvation` (with :mod:`.holds`, what it holds and gives back) and :mod:`.publishing`
(queue statuses) —, :mod:`.min_runtime` (when running pods pass their minimum runtime), and
:mod:`.plugin` (the plugin, which builds the books and the families each session, registers
each hook from the family that answers it, and keeps what they carry between cycles: the
usage history, the guard's holds, the minimum runtimes). This module is its façade: the
registry and tests import the plugin through it.
"""

# isort: skip_file
from berth.scheduler.plugins.proportion.accounting import NAME
from berth.scheduler.plugins.proportion.args import ProportionArgs
from berth.scheduler.plugins.proportion.plugin import Proportion, new
from berth.scheduler.plugins.proportion.reclaim import ReclaimMode
from berth.scheduler.plugins.proportion.starvation import MAX_HOLDERS

__all__ = [
    "MAX_HOLDERS",
    "NAME",
    "Proportion",
    "ProportionArgs",
    "ReclaimMode",
    "new",
]
