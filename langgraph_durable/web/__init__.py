"""The web console: an approvals inbox, runs, thread timelines and unknown effects.

Server-rendered pages (Starlette and Jinja2, the `web` extra), mounted in your app:

    async with AsyncDurablePostgresSaver.from_conn_string(DSN) as saver:
        graph = builder.compile(checkpointer=saver)
        app.mount("/console", create_app(saver, graphs=[graph], authenticate=user_of))

or served on its own: `langgraph-durable web --dsn ... --port 8080` (see `serve`).
"""

from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from langgraph_durable.errors import MissingExtraError

    raise MissingExtraError(
        "The web console needs the web extra: pip install 'langgraph-durable[web]'."
    ) from exc

from langgraph_durable.web._app import create_app
from langgraph_durable.web._serve import serve

__all__ = ["create_app", "serve"]
