"""The README's outbox snippet runs as written, on a fresh database."""

from __future__ import annotations

import re
from pathlib import Path

from langgraph_durable import DurablePostgresSaver

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_outbox_snippet_runs(fresh_db_dsn: str) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Outbox: events that commit with the step") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert snippet is not None
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    namespace: dict[str, object] = {"DSN": fresh_db_dsn, "__name__": "readme_outbox"}
    exec(compile(snippet.group(1), "README.md", "exec"), namespace)
    assert namespace["received"] == ["order.shipped", "invoice.created"]
