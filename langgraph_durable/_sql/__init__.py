"""All SQL of langgraph-durable, loaded by name from the files beside this module.

`QUERIES` maps each `-- name:` block of `queries.sql` to its text. `MIGRATIONS` lists the
numbered migration files in the order they apply. Keeping SQL in files (not f-strings)
means a DBA can read every statement, and no value can ever be formatted into one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, cast

from typing_extensions import LiteralString

__all__ = [
    "ARRAYS",
    "INLINE_ROWS",
    "MIGRATIONS",
    "PSYCOPG_CACHED_QUERY_BYTES",
    "PSYCOPG_CACHED_QUERY_PARAMS",
    "QUERIES",
    "SCHEMA",
    "STATEMENT_BLOCKS",
    "Migration",
    "claim_effect",
    "complete_effect",
    "parameter_names",
    "parse_queries",
    "put_checkpoint",
    "put_checkpoint_statement",
    "put_checkpoints",
    "store_writes",
    "take_over_effect",
]

_NAME = re.compile(r"^-- name: (?P<name>[a-z0-9_]+)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split a queries file into named statements.

    A block runs from its `-- name:` line to the next one. Comment lines inside a block
    are kept (Postgres ignores them), so a statement's text sent is the text in the
    file; statements assembled from blocks (`_assemble`) go without them.
    """
    matches = list(_NAME.finditer(text))
    queries: dict[str, LiteralString] = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip().rstrip(";").strip()
        name = match.group("name")
        if name in queries:
            raise ValueError(f"duplicate query name in queries.sql: {name}")
        # The text comes from this package's own file, never from input: it is literal SQL.
        queries[name] = body
    return queries


@dataclass(frozen=True)
class Migration:
    """One numbered migration file.

    Attributes:
        series: "upstream" migrations are the tables of langgraph-checkpoint-postgres and are
            recorded in its `checkpoint_migrations` table with the same numbers, so its
            `setup()` sees them as done; "durable" migrations are ours, recorded in
            `langgraph_durable_migrations`.
        version: The number in the file name.
        name: The file name without `.sql`.
        concurrently: The statement uses CONCURRENTLY and must run outside a transaction.
        sql: The statement.
        index: The index a CONCURRENTLY migration builds (to repair an interrupted build).
        drops: The index a CONCURRENTLY migration drops (only an index of a checkpoint
            table: `index_of_checkpoint_tables`).
    """

    series: Literal["upstream", "durable"]
    version: int
    name: str
    concurrently: bool
    sql: LiteralString
    index: str | None = None
    drops: str | None = None


_INDEX = re.compile(r"CREATE INDEX CONCURRENTLY IF NOT EXISTS (?P<name>\w+)", re.IGNORECASE)
_DROPS = re.compile(r"^DROP INDEX CONCURRENTLY IF EXISTS (?P<name>\w+)", re.IGNORECASE | re.M)
_MIGRATION_FILE = re.compile(r"^(?P<series>upstream|durable)_(?P<version>\d{3})(?P<rest>.*)\.sql$")


def _load_migrations() -> tuple[Migration, ...]:
    folder = resources.files(__name__).joinpath("migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match is None:
            continue
        series = cast(Literal["upstream", "durable"], match.group("series"))
        sql = entry.read_text(encoding="utf-8").strip()
        index = _INDEX.search(sql)
        drops = _DROPS.search(sql)
        found.append(
            Migration(
                series=series,
                version=int(match.group("version")),
                name=entry.name.removesuffix(".sql"),
                concurrently=entry.name.endswith("_concurrently.sql"),
                sql=sql,
                index=index.group("name") if index else None,
                drops=drops.group("name") if drops else None,
            )
        )
    # Upstream's tables first, then ours, each in number order.
    found.sort(key=lambda m: (m.series != "upstream", m.version))
    return tuple(found)


QUERIES: dict[str, LiteralString] = parse_queries(
    resources.files(__name__).joinpath("queries.sql").read_text(encoding="utf-8")
)


PSYCOPG_CACHED_QUERY_BYTES = 4096
PSYCOPG_CACHED_QUERY_PARAMS = 50
"""psycopg caches how it converts a query's `%(name)s` placeholders only for a query of at
most this many bytes, executed with at most this many parameters (every key of the
mapping counts, used or not); past either, it parses the query again on every execute,
150-200 us of CPU for the checkpoint statement. Assembled statements keep within both
(`tests/unit/test_sql_rules.py` checks every variant of the checkpoint statement)."""


def _assemble(*names: str | None) -> LiteralString:
    """The statement made of these blocks of queries.sql, in order (None: left out), without
    their comment lines (they document the blocks in the file; sent, they would make the
    checkpoint statement longer than `PSYCOPG_CACHED_QUERY_BYTES`).

    `<block>:<n>` is a block with one row line (the line whose parameters are named
    `#_...`) repeated for n rows, their parameters numbered from 0 (`b0_...`, `b1_...`).
    Only parameter names are numbered: no value is ever formatted into SQL.
    """
    lines: list[LiteralString] = []
    for name in names:
        if name is None:
            continue
        block, _, count = name.partition(":")
        if block not in STATEMENT_BLOCKS:
            raise KeyError(f"not a statement block: {block}")
        block_lines = [
            line for line in QUERIES[block].splitlines() if not line.lstrip().startswith("--")
        ]
        if count:
            (row,) = [line for line in block_lines if "#_" in line]  # exactly one row line
            rows = ",\n".join(row.replace("#_", f"{i}_") for i in range(int(count)))
            block_lines = [rows if line == row else line for line in block_lines]
        lines += block_lines
    return "\n".join(lines)


def _fence(fenced: bool) -> LiteralString:
    """The fence block: a token lookup under a thread lease, else a constant."""
    return "fence_by_token" if fenced else "fence_none"


INLINE_ROWS = 2
"""Up to this many blobs, or parked writes, go into the checkpoint statement as rows of
scalar parameters (`*_rows_values`), more as arrays it unnests (`*_rows_unnested`).
Unnesting costs the server 15-20 us more per block, and our array dumpers cost the
client more than psycopg's scalar ones; a step's put usually carries one or two of each.
The bound keeps the variants of the statement (each prepared per connection, where
psycopg keeps 100) few, and its parameters within `PSYCOPG_CACHED_QUERY_PARAMS`."""

ARRAYS = -1
"""A row count for `put_checkpoint`: more rows than `INLINE_ROWS`, sent as arrays."""


@functools.cache
def put_checkpoint(
    *,
    fenced: bool = True,
    blob_rows: int = ARRAYS,
    parked_write_rows: int = ARRAYS,
    events: bool = True,
    progress: bool = True,
) -> LiteralString:
    """The checkpoint statement from the `put_checkpoint_*` blocks of queries.sql, with only
    the data-modifying CTEs the call has rows for: each one costs the server 25-40 us
    even when it inserts nothing, about 0.15 ms of a 0.7 ms put with all of them. The
    token lookup only under a thread lease (`fenced`).

    `blob_rows` and `parked_write_rows`: 0 leaves the block out, 1 to `INLINE_ROWS` sends
    that many rows of scalar parameters, `ARRAYS` any number as arrays.
    """
    blobs = ("put_checkpoint_blobs", _rows("blob_rows", blob_rows), "put_checkpoint_blobs_end")
    writes = (
        "put_checkpoint_parked_writes",
        _rows("parked_write_rows", parked_write_rows),
        "put_checkpoint_parked_writes_end",
    )
    return _assemble(
        "put_checkpoint_head",
        _fence(fenced),
        *(blobs if blob_rows else ()),
        *(writes if parked_write_rows else ()),
        "task_events" if events else None,
        "put_checkpoint_progress" if progress else None,
        "put_checkpoint_insert",
    )


def _rows(block: str, count: int) -> str:
    """The name of the rows block for `count` rows: `<block>_unnested` for `ARRAYS`, else
    `<block>_values`, whose row line `_assemble` repeats and numbers (`#` in its
    parameters' names: 0, 1, ...)."""
    if count == ARRAYS:
        return f"{block}_unnested"
    if count > INLINE_ROWS:
        raise ValueError(f"{count} rows: at most {INLINE_ROWS}, or ARRAYS")
    return f"{block}_values:{count}"  # 0: the block is left out, its name unused


_BLOB_COLUMNS = (
    ("channel", "channels"),
    ("version", "versions"),
    ("type", "types"),
    ("blob", "blobs"),
)
_WRITE_COLUMNS = (
    ("checkpoint_id", "w_checkpoint_ids"),
    ("task_id", "w_task_ids"),
    ("task_path", "w_task_paths"),
    ("idx", "w_idxs"),
    ("channel", "w_channels"),
    ("type", "w_types"),
    ("blob", "w_blobs"),
)


def put_checkpoint_statement(
    params: Mapping[str, Any],
) -> tuple[LiteralString, Mapping[str, Any]]:
    """The checkpoint statement for one call's parameters (see `put_checkpoint`), and the
    parameters to execute it with: only those it names, the rows of scalar parameters
    included when a few blobs or parked writes go as rows (`PSYCOPG_CACHED_QUERY_PARAMS`
    counts every key passed). Built from a plan kept per shape of statement: this runs on
    every step."""
    plan = _statement_plan(
        params["fence_token"] is not None,
        _row_count(len(params["blobs"])),
        _row_count(len(params["w_task_ids"])),
        bool(params["e_ids"]),
        params["run_id"] is not None,
    )
    values = {name: params[name] for name in plan.scalars}
    for name, array, i in plan.rows:
        values[name] = params[array][i]
    return plan.query, values


@dataclass(frozen=True)
class _StatementPlan:
    """A checkpoint statement, the parameters it takes as they are, and those it takes
    from a column array's row: (`b0_blob`, `blobs`, 0)."""

    query: LiteralString
    scalars: tuple[str, ...]
    rows: tuple[tuple[str, str, int], ...]


@functools.cache
def _statement_plan(
    fenced: bool, blob_rows: int, write_rows: int, events: bool, progress: bool
) -> _StatementPlan:
    query = put_checkpoint(
        fenced=fenced,
        blob_rows=blob_rows,
        parked_write_rows=write_rows,
        events=events,
        progress=progress,
    )
    from_rows = {
        f"{prefix}{i}_{column}": (array, i)
        for prefix, columns, count in (
            ("b", _BLOB_COLUMNS, blob_rows),
            ("w", _WRITE_COLUMNS, write_rows),
        )
        for i in range(max(count, 0))
        for column, array in columns
    }
    names = parameter_names(query)
    return _StatementPlan(
        query=query,
        scalars=tuple(name for name in names if name not in from_rows),
        rows=tuple((name, *from_rows[name]) for name in names if name in from_rows),
    )


@functools.cache
def parameter_names(query: str) -> tuple[str, ...]:
    """The `%(name)s` parameters `query` names, each once."""
    return tuple(dict.fromkeys(_PARAMETER.findall(query)))


_PARAMETER = re.compile(r"%\((\w+)\)[sbt]")
"""A named placeholder as our statements write them (word characters; psycopg accepts
more). No statement block holds `%%`, a placeholder in a string literal or one in a
comment (comments are dropped by `_assemble`). A placeholder this missed would fail the
statement loudly (psycopg: a parameter is missing), never store something else."""


def _row_count(count: int) -> int:
    return count if count <= INLINE_ROWS else ARRAYS


@functools.cache
def put_checkpoints(*, blobs: bool, parked_writes: bool) -> LiteralString:
    """The statement for several unfenced checkpoints at once (`put_checkpoints_*` blocks),
    with the blobs' and parked writes' CTEs only when the batch has such rows."""
    return _assemble(
        "put_checkpoints_head",
        "put_checkpoints_blobs" if blobs else None,
        "put_checkpoints_parked_writes" if parked_writes else None,
        "put_checkpoints_insert",
    )


@functools.cache
def store_writes(*, fenced: bool, replace: bool, events: bool) -> LiteralString:
    """A task's writes statement: the token lookup only under a thread lease (`fenced`),
    `replace` for special writes (they replace what the task wrote before), with the
    `task_events` block only when the task emitted events."""
    return _assemble(
        "writes_fence",
        _fence(fenced),
        "writes_stored",
        "writes_replace" if replace else "writes_keep_first",
        "task_events" if events else None,
        "writes_end",
    )


@functools.cache
def claim_effect(*, fenced: bool) -> LiteralString:
    """An effect's claim: the token lookup only under a thread lease (`fenced`)."""
    return _assemble("effect_claim_head", _fence(fenced), "effect_claim_insert")


@functools.cache
def take_over_effect(*, fenced: bool) -> LiteralString:
    """An effect's next attempt: the token lookup only under a thread lease (`fenced`)."""
    return _assemble("effect_take_over_head", _fence(fenced), "effect_take_over_update")


@functools.cache
def complete_effect(*, events: bool) -> LiteralString:
    """An effect's completion statement: the UPDATE alone, or, when it has outbox events
    (`@effect(event=...)`), the UPDATE as a CTE with the events after it. Either way its
    row count is 1 if it stored the result."""
    if not events:
        return _assemble("effect_complete_update")
    return _assemble(
        "effect_complete_events_head", "effect_complete_update", "effect_complete_events"
    )


STATEMENT_BLOCKS = frozenset(
    {
        "put_checkpoint_head",
        "fence_by_token",
        "fence_none",
        "put_checkpoint_blobs",
        "blob_rows_unnested",
        "blob_rows_values",
        "put_checkpoint_blobs_end",
        "put_checkpoint_parked_writes",
        "parked_write_rows_unnested",
        "parked_write_rows_values",
        "put_checkpoint_parked_writes_end",
        "put_checkpoint_progress",
        "put_checkpoint_insert",
        "task_events",
        "writes_fence",
        "writes_stored",
        "writes_keep_first",
        "writes_replace",
        "writes_end",
        "effect_claim_head",
        "effect_claim_insert",
        "effect_take_over_head",
        "effect_take_over_update",
        "effect_complete_events_head",
        "effect_complete_update",
        "effect_complete_events",
        "put_checkpoints_head",
        "put_checkpoints_blobs",
        "put_checkpoints_parked_writes",
        "put_checkpoints_insert",
        "interrupted_run_still_asks",
        "runs_flag_stuck_head",
        "runs_flag_stuck_tail",
        "runs_stuck_head",
        "runs_stuck_tail",
        "doctor_registry_head",
        "doctor_registry_tail",
    }
)
"""The blocks of queries.sql that are parts of a statement, not statements (only
`_assemble` joins them): rules about whole statements are checked on the assembled ones
below."""


def waits_for_a_person(query: str) -> LiteralString:
    """`query` (`runs_flag_stuck`, `runs_stuck`, `doctor_registry`) with its condition on an
    interrupted run that still waits for a person (`interrupted_run_still_asks`): one
    block, so the sweep that flags runs, the list and the doctor's count agree."""
    return _assemble(f"{query}_head", "interrupted_run_still_asks", f"{query}_tail")


QUERIES["put_checkpoint"] = put_checkpoint()
for _query in ("runs_flag_stuck", "runs_stuck", "doctor_registry"):
    QUERIES[_query] = waits_for_a_person(_query)
QUERIES["insert_writes"] = store_writes(fenced=True, replace=False, events=True)
QUERIES["upsert_writes"] = store_writes(fenced=True, replace=True, events=True)
QUERIES["effect_complete"] = complete_effect(events=True)
QUERIES["effect_claim"] = claim_effect(fenced=True)
QUERIES["effect_take_over"] = take_over_effect(fenced=True)
# `get_tuple`'s two statements, joined once rather than on every call.
QUERIES["select_tuple_exact"] = QUERIES["select_tuple_columns"] + "\n" + QUERIES["where_exact"]
QUERIES["select_tuple_latest"] = QUERIES["select_tuple_columns"] + "\n" + QUERIES["where_latest"]


def _whole_blobs(query: LiteralString) -> LiteralString:
    """`query` with every blob inside the tuple's array, none left out for its size: one
    statement, one snapshot, for the read again after a large blob went missing."""
    whole = query.replace("octet_length(bl.blob) <= 131072", "true").replace(
        "octet_length(bl.blob) > 131072", "false"
    )
    if whole.count("true") - query.count("true") != 1 or whole == query:
        raise AssertionError("select_tuple_columns no longer tests a blob's size")
    return whole


QUERIES["select_tuple_columns_whole"] = _whole_blobs(QUERIES["select_tuple_columns"])
QUERIES["select_tuple_exact_whole"] = _whole_blobs(QUERIES["select_tuple_exact"])
QUERIES["select_tuple_latest_whole"] = _whole_blobs(QUERIES["select_tuple_latest"])
MIGRATIONS: tuple[Migration, ...] = _load_migrations()
SCHEMA: LiteralString = resources.files(__name__).joinpath("schema.sql").read_text(encoding="utf-8")
