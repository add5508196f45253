"""A process that calls `setup()` on command, for the concurrent-setup test.

One JSON object per line each way. The test sends `{"flavour": "sync"|"async", "dsn": ...}`;
the worker opens a saver and answers `{"ready": true}`; the test sends `go` to every worker
at once; each calls `setup()` and answers `{"applied": [...]}` or
`{"error": "<class name>", "message": "..."}`, then closes its saver. End of input ends it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver


def reply(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


def failure(exc: Exception) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": str(exc)}


def run_sync(dsn: str) -> dict[str, Any]:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        reply({"ready": True})
        sys.stdin.readline()
        try:
            return {"applied": saver.setup()}
        except Exception as exc:
            return failure(exc)


async def run_async(dsn: str) -> dict[str, Any]:
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        reply({"ready": True})
        await asyncio.to_thread(sys.stdin.readline)
        try:
            return {"applied": await saver.setup()}
        except Exception as exc:
            return failure(exc)


def main() -> None:
    for line in sys.stdin:
        command = json.loads(line)
        try:
            if command["flavour"] == "sync":
                outcome = run_sync(command["dsn"])
            else:
                outcome = asyncio.run(run_async(command["dsn"]))
        except Exception as exc:  # opening the saver failed: report it, stay alive
            outcome = failure(exc)
        reply(outcome)


if __name__ == "__main__":
    main()
