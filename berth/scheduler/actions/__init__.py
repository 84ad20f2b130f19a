"""Actions run over a session: allocate, backfill, reclaim, preempt."""
