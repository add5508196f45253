"""A worker process for the Northwind graph: `python northwind_worker.py NAME` (DSN: env).

It runs `Worker.run_forever()` on the example's graph, as a deployed worker would; the
browser test SIGKILLs one while its run waits for the manager and starts another.
"""

from __future__ import annotations

import os
import sys

from console_host import northwind

from langgraph_durable import DurablePostgresSaver, GraphVersion, Worker


def main() -> None:
    dsn = os.environ["LANGGRAPH_DURABLE_DSN"]
    example = northwind()
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = example.build(dsn).compile(checkpointer=saver)
        worker = Worker(saver, [GraphVersion("northwind", "1", graph)], name=sys.argv[1])
        worker.run_forever()


if __name__ == "__main__":
    main()
