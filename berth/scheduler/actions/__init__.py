"""Actions run over a session: timelimit, allocate, backfill, reclaim, preempt."""
