"""How the CLI shows results: one JSON object for scripts, tables and lines for people.

JSON keeps numbers as numbers, times as ISO 8601 strings, ages in seconds and missing
values as null, so scripts can rely on its shape. Tables are for reading: cells are cut
to a width, and long work reports progress on stderr while a person watches (only when
stderr is a terminal, so scripts and logs stay clean).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from datetime import date, datetime, timedelta
from typing import IO, Any

from langgraph_durable.ops import plain

__all__ = ["Progress", "as_json", "cell", "print_table", "record"]

CELL_WIDTH = 60


def record(value: Any) -> Any:
    """A result as JSON shows it (dataclasses as objects, times as ISO 8601)."""
    if is_dataclass(value) and not isinstance(value, type):
        return record(asdict(value))
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return plain(value)


def as_json(result: Mapping[str, Any]) -> str:
    """One JSON object. A number JSON cannot hold (NaN, an infinity, which Python's
    `json` writes as bare `NaN`, which strict parsers refuse) is written as its name, a
    string."""
    shown = record(result)
    try:
        return json.dumps(shown, default=str, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(shown), default=str, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def cell(value: Any, width: int = CELL_WIDTH) -> str:
    """One table cell: text on one line, cut to `width` characters."""
    if value is None:
        text = "-"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(record(value), default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def print_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    empty: str,
    out: IO[str] | None = None,
) -> None:
    """`rows` as a table with a header, or the line `empty` when there are none."""
    stream = out or sys.stdout
    if not rows:
        print(empty, file=stream)
        return
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(
        "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
        file=stream,
    )
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip(), file=stream)


class Progress:
    """A progress bar on stderr for long work, drawn only when stderr is a terminal."""

    def __init__(self, total: int, label: str, *, stream: IO[str] | None = None) -> None:
        self.total, self.label, self.done = total, label, 0
        self.stream = stream or sys.stderr
        self.shown = self.stream.isatty() and total > 1

    def advance(self, by: int = 1) -> None:
        self.done += by
        if self.shown:
            filled = round(30 * self.done / self.total)
            bar = "#" * filled + "." * (30 - filled)
            end = "\n" if self.done >= self.total else ""
            print(f"\r{self.label} [{bar}] {self.done}/{self.total}", end=end, file=self.stream)
            self.stream.flush()
