"""``NodeTable``: every node's state as NumPy struct-of-arrays, the input of Filter and Score.

One row per node, rows in node-name order (so the lowest row is a deterministic tie-break),
one column per resource (``cpu``, ``memory``, ``ephemeral-storage`` and ``pods`` always, then
every other name the cluster mentions, sorted). Quantities are ``int64`` milli-units.

The arrays a session mutates (``allocatable``, ``requested``, ``version``) belong to one table;
``copy()`` duplicates them and shares the static part: names, labels, taints and the masks
cached per requirement, term or caller-chosen key. Those caches depend on the static part
alone, so ``fresh_copy()`` (a new snapshot) keeps them too: while no node's labels, taints or
allocatable change (the cache builds a new table when they do), 10 000 pods with one node
selector cost one label lookup in all, not one per cycle. Memory stays bounded: the memo starts
over once it holds :data:`MEMO_LIMIT` entries.

``requested`` changes only through ``assume``/``forget``, which bump the row's ``version`` and
log the row, so a per-row result (a fit mask, a score) can be kept by :meth:`incremental` and
refreshed for the changed rows alone: placing 10 000 identical pods recomputes one row per pod,
not 5 000. The same holds from one snapshot to the next: the cache keeps its master table in
step with every pod change through ``assume``/``forget``, so a snapshot's table
(:meth:`fresh_copy`) inherits the tail of the master's log, and a result a snapshot's table
computed before its session changed anything is handed on (in the master's generations) to the
next snapshot's, which refreshes only the rows that changed in between (so a cycle costs the
changes since the last one, not a pass over every node per pod shape). ``allocatable`` is set
when the table is built or copied (a FilterHook may change its copy's before handing it on) and
never changes afterwards; a plain :meth:`copy` therefore neither takes nor hands on results.

Built by the cache's :class:`~berth.scheduler.snapshot.nodestore.NodeStore`; read by plugins,
mutated by the framework's ``Statement`` through ``assume``/``forget``.
"""

from __future__ import annotations

import collections.abc
import typing

import numpy as np
import numpy.typing as npt

from berth.api import resources
from berth.scheduler.snapshot import ids, nodes, selectors, taints

__all__ = [
    "BASE_RESOURCES",
    "MEMO_LIMIT",
    "AnyArray",
    "BoolArray",
    "IntArray",
    "NodeTable",
    "RowFunction",
    "TaintList",
]

BASE_RESOURCES = (resources.CPU, resources.MEMORY, resources.EPHEMERAL_STORAGE, resources.PODS)
"""Columns every table has, first and in this order."""

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
AnyArray = npt.NDArray[typing.Any]
TaintList = tuple[taints.Taint, ...]
_LOG_LIMIT = 1 << 16  # changed rows remembered for incremental results
_LOCAL_LIMIT = 256  # incremental results kept per table (each is one array over rows)
# Changes a snapshot's table inherits from the master's log: results older than that are
# recomputed in full (cheaper by then than refreshing that many rows one by one).
_INHERITED_LOG = 256
_PER_ROW_LIMIT = 16  # up to this many changed rows, per-row Python beats NumPy's call overhead
MEMO_LIMIT = 4096
"""Cached masks and vectors kept across snapshots before the memo starts over (each is one
small array; a cluster's pod shapes and selectors number far fewer)."""

RowFunction = collections.abc.Callable[[list[int], list[int]], typing.Any]
"""``per_row(allocatable, requested)`` of :meth:`NodeTable.incremental`: one row's value."""
T = typing.TypeVar("T")


class _Derived:
    """What is computed from a static part alone, shared by the tables of every snapshot."""

    __slots__ = ("label_index", "memo", "results", "taint_matrix")

    def __init__(self) -> None:
        self.taint_matrix: BoolArray | None = None
        self.label_index: dict[str, dict[str, list[int]]] = {}
        self.memo: dict[typing.Hashable, typing.Any] = {}
        # incremental() results as of a master generation, handed from snapshot to snapshot
        # (written and read by sessions only; the arrays are never changed once stored).
        self.results: dict[typing.Hashable, tuple[int, AnyArray]] = {}


class _Static:
    """The part of a table no session changes, shared by its copies, with its caches."""

    __slots__ = (
        "_derived",
        "column",
        "distinct_taints",
        "images",
        "index",
        "labels",
        "names",
        "resources",
        "taints",
        "unschedulable",
    )

    def __init__(
        self,
        *,
        names: list[ids.NodeName],
        resource_names: tuple[str, ...],
        labels: list[collections.abc.Mapping[str, str]],
        taint_lists: list[tuple[taints.Taint, ...]],
        unschedulable: BoolArray,
        images: list[collections.abc.Mapping[str, int]] | None = None,
    ) -> None:
        self.names = names
        self.images = images if images is not None else [{} for _ in names]
        self.index: dict[str, int] = {name: row for row, name in enumerate(names)}
        self.resources = resource_names
        self.column: dict[str, int] = {name: col for col, name in enumerate(resource_names)}
        self.labels = labels
        self.taints = taint_lists
        self.unschedulable = unschedulable
        self.unschedulable.setflags(write=False)
        distinct = sorted(
            {t for ts in taint_lists for t in ts}, key=lambda t: (t.key, t.value, t.effect)
        )
        self.distinct_taints: tuple[taints.Taint, ...] = tuple(distinct)
        self._derived = _Derived()

    def fresh(self) -> _Static:
        """The same static data for the next snapshot: the caches carry over (they depend on
        nothing else), unless the memo reached :data:`MEMO_LIMIT` — then it starts over here
        and for every later snapshot (earlier ones keep theirs)."""
        if len(self._derived.memo) >= MEMO_LIMIT:
            kept = self._derived
            self._derived = _Derived()
            self._derived.taint_matrix = kept.taint_matrix
            self._derived.label_index = kept.label_index
        twin = _Static.__new__(_Static)
        for slot in _Static.__slots__:
            setattr(twin, slot, getattr(self, slot))
        return twin

    def taint_matrix(self) -> BoolArray:
        derived = self._derived
        if derived.taint_matrix is None:
            position = {t: i for i, t in enumerate(self.distinct_taints)}
            matrix = np.zeros((len(self.names), len(self.distinct_taints)), dtype=np.bool_)
            for row, ts in enumerate(self.taints):
                for t in ts:
                    matrix[row, position[t]] = True
            matrix.setflags(write=False)
            derived.taint_matrix = matrix
        return derived.taint_matrix

    def label_index(self, key: str) -> dict[str, list[int]]:
        """Label value -> rows carrying it, for one label key (built on first use)."""
        found = self._derived.label_index.get(key)
        if found is None:
            found = {}
            for row, labels in enumerate(self.labels):
                value = labels.get(key)
                if value is not None:
                    found.setdefault(value, []).append(row)
            self._derived.label_index[key] = found
        return found

    def handed_on(self, key: typing.Hashable) -> tuple[int, AnyArray] | None:
        """The latest ``incremental`` result for ``key`` a snapshot handed on (read-only)."""
        return self._derived.results.get(key)

    def hand_on(self, key: typing.Hashable, *, generation: int, values: AnyArray) -> None:
        """Keep ``values`` (now read-only) as ``key``'s result as of master ``generation``."""
        results = self._derived.results
        results.pop(key, None)  # re-inserted last: the least recently handed on go first
        if len(results) >= _LOCAL_LIMIT:
            del results[next(iter(results))]
        values.setflags(write=False)
        results[key] = (generation, values)

    def memo(self, key: typing.Hashable, compute: collections.abc.Callable[[], T]) -> T:
        memo = self._derived.memo
        try:
            found: T = memo[key]  # called a few times per attempt: no cast() call
            return found
        except KeyError:
            value = memo[key] = compute()
            return value


class _Entry:
    """One :meth:`NodeTable.incremental` result and the generation it reflects."""

    __slots__ = ("generation", "values")

    def __init__(self, generation: int, values: AnyArray) -> None:
        self.generation = generation
        self.values = values


class NodeTable:
    """Struct-of-arrays over nodes; see the module docstring for the sharing rules."""

    __slots__ = (
        "_born",
        "_heir",
        "_local",
        "_log",
        "_log_base",
        "_static",
        "allocatable",
        "generation",
        "requested",
        "version",
    )

    def __init__(
        self,
        static: _Static,
        /,
        *,
        allocatable: IntArray,
        requested: IntArray,
        version: IntArray | None = None,
    ) -> None:
        self._static = static
        self.allocatable = allocatable
        self.requested = requested
        self.version: IntArray = (
            np.zeros(len(static.names), dtype=np.int64) if version is None else version
        )
        self.generation = 0  # bumped by every assume/forget: "has anything changed?" in O(1)
        self._log: list[int] = []  # the row of each assume/forget since generation _log_base
        self._log_base = 0
        self._local: dict[typing.Hashable, _Entry] = {}  # this instance's only
        # A snapshot's table (fresh_copy): it takes over results earlier snapshots handed on,
        # and hands on its own while its quantities are still the master's (generation _born).
        self._heir = False
        self._born = 0

    @classmethod
    def build(
        cls,
        infos: collections.abc.Iterable[nodes.NodeInfo],
        /,
        *,
        requested: collections.abc.Mapping[str, collections.abc.Mapping[str, int]] | None = None,
        extra_resources: collections.abc.Iterable[str] = (),
    ) -> NodeTable:
        """A table over ``infos`` (any order; rows are sorted by name) with ``requested`` sums
        per node name; columns cover every name in allocatable, requested and
        ``extra_resources``."""
        ordered = sorted(infos, key=lambda info: info.name)
        requested = requested or {}
        names_seen: set[str] = set(extra_resources)
        for info in ordered:
            names_seen.update(info.allocatable)
            names_seen.update(requested.get(info.name, {}))
        extras = sorted(names_seen.difference(BASE_RESOURCES))
        resource_names = BASE_RESOURCES + tuple(extras)
        column = {name: col for col, name in enumerate(resource_names)}
        allocatable = np.zeros((len(ordered), len(resource_names)), dtype=np.int64)
        used = np.zeros_like(allocatable)
        for row, info in enumerate(ordered):
            for name, value in info.allocatable.items():
                allocatable[row, column[name]] = value
            for name, value in requested.get(info.name, {}).items():
                used[row, column[name]] = value
        static = _Static(
            names=[info.name for info in ordered],
            resource_names=resource_names,
            labels=[info.labels for info in ordered],
            taint_lists=[info.taints for info in ordered],
            unschedulable=np.array([info.unschedulable for info in ordered], dtype=np.bool_),
            images=[info.images for info in ordered],
        )
        return cls(static, allocatable=allocatable, requested=used)

    # Shape and names ------------------------------------------------------------------------
    @property
    def names(self) -> list[ids.NodeName]:
        """Node names by row (do not mutate)."""
        return self._static.names

    @property
    def index(self) -> collections.abc.Mapping[str, int]:
        """Node name -> row."""
        return self._static.index

    @property
    def resources(self) -> tuple[str, ...]:
        """Resource name by column."""
        return self._static.resources

    @property
    def column(self) -> collections.abc.Mapping[str, int]:
        """Resource name -> column."""
        return self._static.column

    def __len__(self) -> int:
        return len(self._static.names)

    # Static attributes ----------------------------------------------------------------------
    @property
    def unschedulable(self) -> BoolArray:
        """``spec.unschedulable`` per row (read-only)."""
        return self._static.unschedulable

    @property
    def labels(self) -> list[collections.abc.Mapping[str, str]]:
        """Labels per row (do not mutate)."""
        return self._static.labels

    @property
    def taints(self) -> list[TaintList]:
        """Taints per row, in each node's order (do not mutate)."""
        return self._static.taints

    @property
    def images(self) -> list[collections.abc.Mapping[str, int]]:
        """Images per row: normalised name -> size in bytes (do not mutate)."""
        return self._static.images

    @property
    def distinct_taints(self) -> TaintList:
        """Every taint some node has, sorted: the columns of :meth:`taint_matrix`."""
        return self._static.distinct_taints

    def taint_matrix(self) -> BoolArray:
        """``[rows, distinct taints]``: whether each node carries each taint (read-only)."""
        return self._static.taint_matrix()

    def requirement_mask(self, req: selectors.Requirement, /) -> BoolArray:
        """Rows whose labels satisfy ``req`` (cached with the static part; read-only)."""
        return self._static.memo(("requirement", req), lambda: self._requirement_mask(req))

    def field_mask(self, req: selectors.Requirement, /) -> BoolArray:
        """Rows whose ``metadata.name`` satisfies ``req`` (cached; read-only)."""
        return self._static.memo(("field", req), lambda: self._field_mask(req))

    def term_mask(self, term: selectors.SelectorTerm, /) -> BoolArray:
        """Rows matching a node selector term: all its requirements (cached; read-only)."""
        return self._static.memo(("term", term), lambda: self._term_mask(term))

    def cached(self, key: typing.Hashable, /, *, compute: collections.abc.Callable[[], T]) -> T:
        """``compute()`` once per ``key`` for as long as the static part lives (from snapshot
        to snapshot while no node's static attributes change; see :data:`MEMO_LIMIT`).

        For values that depend only on static attributes (labels, taints, names, resource
        columns, unschedulable) and on what the key itself holds (never on quantities); keys
        should start with the caller's plugin name.
        """
        return self._static.memo(key, compute)

    def _requirement_mask(self, req: selectors.Requirement) -> BoolArray:
        size = len(self)
        if not req.valid:
            return _frozen(np.zeros(size, dtype=np.bool_))
        by_value = self._static.label_index(req.key)
        has = np.zeros(size, dtype=np.bool_)
        for rows in by_value.values():
            has[rows] = True
        if req.operator in (selectors.EXISTS, selectors.DOES_NOT_EXIST):
            return _frozen(has if req.operator == selectors.EXISTS else ~has)
        if req.operator in (selectors.IN, selectors.NOT_IN):
            hit = np.zeros(size, dtype=np.bool_)
            for value in set(req.values):
                if value in by_value:
                    hit[by_value[value]] = True
            return _frozen(hit if req.operator == selectors.IN else ~hit)
        mask = np.zeros(size, dtype=np.bool_)
        for value, rows in by_value.items():
            if selectors.requirement_matches(req, value=value):
                mask[rows] = True
        return _frozen(mask)

    def _field_mask(self, req: selectors.Requirement) -> BoolArray:
        size = len(self)
        if req.key != selectors.METADATA_NAME or req.operator not in (
            selectors.IN,
            selectors.NOT_IN,
        ):
            return _frozen(np.zeros(size, dtype=np.bool_))
        hit = np.zeros(size, dtype=np.bool_)
        for value in req.values:
            row = self._static.index.get(value)
            if row is not None:
                hit[row] = True
        if not req.valid:
            return _frozen(np.zeros(size, dtype=np.bool_))
        return _frozen(hit if req.operator == selectors.IN else ~hit)

    def _term_mask(self, term: selectors.SelectorTerm) -> BoolArray:
        if term.empty:
            return _frozen(np.zeros(len(self), dtype=np.bool_))
        mask = np.ones(len(self), dtype=np.bool_)
        for req in term.fields:
            mask &= self.field_mask(req)
        for req in term.expressions:
            mask &= self.requirement_mask(req)
        return _frozen(mask)

    # Quantities -----------------------------------------------------------------------------
    def free(self) -> IntArray:
        """``allocatable - requested`` (a new array; may be negative on an overcommitted node)."""
        return self.allocatable - self.requested

    def vector(
        self, requests: collections.abc.Mapping[str, int], /, *, memo: bool = True
    ) -> IntArray:
        """``requests`` as a row vector over the columns (names without a column are dropped:
        see :meth:`missing`). Cached per request while the nodes stay the same: the array is
        read-only. ``memo=False`` for a one-off request (a sum that changes every cycle), so
        it does not crowd out the ones pods share."""
        if not memo or not isinstance(requests, collections.abc.Hashable):
            return self._vector(requests)  # a plain dict: nothing to key a cache on
        return self._static.memo(("vector", requests), lambda: self._vector(requests))

    def _vector(self, requests: collections.abc.Mapping[str, int]) -> IntArray:
        vec = np.zeros(len(self._static.resources), dtype=np.int64)
        column = self._static.column
        for name, value in requests.items():
            col = column.get(name)
            if col is not None:
                vec[col] = value
        vec.setflags(write=False)
        return vec

    def missing(self, requests: collections.abc.Mapping[str, int], /) -> list[str]:
        """Resources ``requests`` asks for that no column has, sorted (no node offers them)."""
        if not isinstance(requests, collections.abc.Hashable):
            return self._missing(requests)
        found: list[str] = self._static.memo(("missing", requests), lambda: self._missing(requests))
        return list(found)

    def _missing(self, requests: collections.abc.Mapping[str, int]) -> list[str]:
        column = self._static.column
        return sorted(name for name, value in requests.items() if value > 0 and name not in column)

    def assume(self, row: int, vec: IntArray, /) -> None:
        """Count ``vec`` as requested on ``row`` (a pod placed there)."""
        self.requested[row] += vec
        self._changed(row)

    def forget(self, row: int, vec: IntArray, /) -> None:
        """Undo :meth:`assume` of ``vec`` on ``row``."""
        self.requested[row] -= vec
        self._changed(row)

    def _changed(self, row: int) -> None:
        self.version[row] += 1
        self.generation += 1
        self._log.append(row)
        if len(self._log) > _LOG_LIMIT:
            # Forget the older half; results older than that are recomputed in full.
            half = len(self._log) // 2
            del self._log[:half]
            self._log_base += half

    def rows_changed_since(self, generation: int, /) -> IntArray | None:
        """Rows changed by assume/forget after ``generation`` (sorted, unique), or ``None``
        when the table no longer remembers that far back (recompute everything)."""
        if generation < self._log_base or generation > self.generation:
            return None
        return np.array(sorted(set(self._log[generation - self._log_base :])), dtype=np.intp)

    def incremental(
        self,
        key: typing.Hashable,
        /,
        *,
        compute: collections.abc.Callable[[IntArray | None], AnyArray],
        per_row: RowFunction | None = None,
    ) -> AnyArray:
        """A per-row array kept for this table instance and refreshed row by row.

        ``compute(None)`` gives the value for every row, ``compute(rows)`` for those rows
        only (in that order). The first call computes all rows; later calls recompute only
        the rows assume/forget changed since. When few rows changed and ``per_row`` is
        given, it is called instead, once per row, with that row's allocatable and requested
        as lists of ints (plain Python beats a dozen NumPy calls on a one-row array); it
        must return exactly what ``compute`` would. ``key`` must capture every input besides
        this table's quantities (e.g. the plugin's name and the pod's request vector as
        bytes). The result is shared: do not modify it (copy it to hand it on).
        """
        entry = self._local.get(key)
        if entry is None and self._heir:
            handed = self._static.handed_on(key)
            if handed is not None:
                entry = self._keep(key, _Entry(handed[0], handed[1].copy()))
        if entry is not None:
            if entry.generation == self.generation:
                return entry.values
            rows = self.rows_changed_since(entry.generation)
            if rows is not None:
                values = entry.values
                if per_row is not None and rows.size <= _PER_ROW_LIMIT:
                    allocatable, requested = self.allocatable, self.requested
                    for row in rows.tolist():
                        values[row] = per_row(allocatable[row].tolist(), requested[row].tolist())
                elif rows.size:
                    values[rows] = compute(rows)
                entry.generation = self.generation
                self._hand_on(key, values)
                return values
        fresh = compute(None)
        self._keep(key, _Entry(self.generation, fresh))
        self._hand_on(key, fresh)
        return fresh

    def _keep(self, key: typing.Hashable, entry: _Entry) -> _Entry:
        if len(self._local) >= _LOCAL_LIMIT:
            del self._local[next(iter(self._local))]  # the oldest key: memory stays bounded
        self._local[key] = entry
        return entry

    def _hand_on(self, key: typing.Hashable, values: AnyArray) -> None:
        """Offer ``values`` to later snapshots while this table is still the master as of its
        birth (afterwards its generations count its own session's changes)."""
        if self._heir and self.generation == self._born:
            self._static.hand_on(key, generation=self.generation, values=values.copy())

    def copy(self) -> NodeTable:
        """An independent table: its own quantity arrays, the same static part and caches
        (but its own :meth:`incremental` results)."""
        return self._twin(self._static)

    def fresh_copy(self) -> NodeTable:
        """What a new snapshot gets (called on the cache's master table): like :meth:`copy`,
        with the caches of the static part, the tail of this table's log, and the
        :meth:`incremental` results earlier snapshots handed on, not this table's own."""
        twin = self._twin(self._static.fresh())
        start = max(self._log_base, self.generation - _INHERITED_LOG)
        twin._log = self._log[start - self._log_base :]
        twin._log_base = start
        twin._heir = True
        twin._born = twin.generation
        return twin

    def _twin(self, static: _Static) -> NodeTable:
        twin = NodeTable(
            static,
            allocatable=self.allocatable.copy(),
            requested=self.requested.copy(),
            version=self.version.copy(),
        )
        twin.generation = twin._log_base = self.generation
        return twin


def _frozen(mask: BoolArray) -> BoolArray:
    mask.setflags(write=False)
    return mask
