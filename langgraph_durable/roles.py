"""A least-privilege database role for applications and workers.

The owner (the role that ran `setup()`) owns the tables and is the only one that migrates
them. Applications, workers and operators' day-to-day tools can run as a role that only
reads and writes rows:

    # once, as the owner, after setup():
    grant_app_role("postgresql://owner@db/app", "app_worker")
    # or: langgraph-durable --dsn postgresql://owner@db/app grant app_worker

That role can run graphs on both savers, `@effect`s and their journal, approvals, the run
registry and workers, and `saver.setup()` on a schema that is already up to date (it only
reads the recorded versions). It cannot create, alter or drop tables or indexes, so it
cannot run a migration: a newer langgraph-durable needs the owner to run `setup()` first.
The grants are the `grant_app_role` statement of `_sql/queries.sql`; `app_role_sql()` prints
them for a DBA. On PostgreSQL 14 and older, every role may create tables in the `public`
schema; run `REVOKE CREATE ON SCHEMA public FROM PUBLIC` there to take DDL away entirely.
"""

from __future__ import annotations

import functools
import re

import psycopg
import psycopg.errors
from psycopg import sql

from langgraph_durable._db import cannot_connect, check_dsn
from langgraph_durable._sql import QUERIES
from langgraph_durable.errors import (
    ConfigurationError,
    DurableError,
    InvalidInputError,
    SchemaNotReadyError,
)

__all__ = ["app_role_privileges", "app_role_sql", "grant_app_role", "revoke_app_role"]


def _statement(name: str, role: str, schema: str) -> sql.Composed:
    for what, value in (("role", role), ("schema", schema)):
        if not value or "\x00" in value:
            raise InvalidInputError(
                f"The {what} name {value!r} is empty or holds a NUL character; give the name "
                f"of an existing {what}."
            )
    return sql.SQL(QUERIES[name]).format(role=sql.Identifier(role), schema=sql.Identifier(schema))


_GRANT = re.compile(
    r"GRANT (?P<privileges>[A-Z, ]+?) ON (?P<kind>TABLE|SEQUENCE)\s+(?P<names>[^;]+?)\s+TO \{role\}"
)


@functools.cache
def app_role_privileges() -> tuple[tuple[str, str, str], ...]:
    """What `grant_app_role` gives on tables and sequences, as (kind, name, privilege):
    ("table", "checkpoint_writes", "INSERT"), ... Read from its statement, so that what
    `doctor` checks an application's role for cannot drift from what is granted."""
    text = "\n".join(
        line for line in QUERIES["grant_app_role"].splitlines() if not line.startswith("--")
    )
    found: list[tuple[str, str, str]] = []
    for grant in _GRANT.finditer(text):
        names = [n.strip().removeprefix("{schema}.") for n in grant["names"].split(",")]
        for privilege in (p.strip() for p in grant["privileges"].split(",")):
            found += [(grant["kind"].lower(), name, privilege) for name in names]
    return tuple(found)


def app_role_sql(role: str, schema: str = "public") -> str:
    """The GRANT statements `grant_app_role` runs, as text for a DBA to review or run.

    Args:
        role: The application role (it must exist: `CREATE ROLE app_worker LOGIN ...`).
        schema: The schema the owner's `setup()` created the tables in.
    """
    statement = _statement("grant_app_role", role, schema)
    return statement.as_string(None) + ";"


def _run(dsn: str, name: str, role: str, schema: str) -> None:
    statement = _statement(name, role, schema)
    check_dsn(dsn)
    try:
        connection = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as exc:
        raise cannot_connect(dsn, exc) from exc
    try:
        with connection as conn, conn.transaction():
            allowed = conn.execute(QUERIES["grant_allowed"], {"schema": schema}).fetchone()
            if allowed is None:
                raise SchemaNotReadyError(
                    f"The tables are not in schema {schema!r}: run `setup()` (or "
                    "`langgraph-durable setup`) as the owner first, then grant. Nothing was "
                    "granted."
                )
            if not allowed[0]:
                raise ConfigurationError(
                    "Only the owner of the tables (the role that ran setup()) or a superuser "
                    "can grant on them; connect as that role. Nothing was granted."
                )
            conn.execute(statement)
    except DurableError:
        raise  # named above (ours are also psycopg's classes)
    except psycopg.errors.UndefinedObject as exc:
        raise ConfigurationError(
            f"Role {role!r} or schema {schema!r} does not exist; create the role first "
            f"(CREATE ROLE ... LOGIN) and name the schema setup() used. Nothing was granted "
            f"(server said: {exc.diag.message_primary})."
        ) from exc
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as exc:
        raise SchemaNotReadyError(
            f"The tables are not in schema {schema!r}: run `setup()` (or `langgraph-durable "
            f"setup`) as the owner first, then grant. Nothing was granted (server said: "
            f"{exc.diag.message_primary})."
        ) from exc
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError(
            "Only the owner of the tables (the role that ran setup()) or a superuser can "
            f"grant on them; connect as that role. Nothing was granted (server said: "
            f"{exc.diag.message_primary})."
        ) from exc


def grant_app_role(dsn: str, role: str, *, schema: str = "public") -> None:
    """Give an existing role what an application needs, and nothing more (see the module).

    Run it as the owner, after `setup()`, and again after an upgrade that adds tables.
    All grants commit together or not at all; granting twice changes nothing.

    Args:
        dsn: A DSN of the database, connecting as the owner of the tables.
        role: The application role.
        schema: The schema the tables are in.

    Raises:
        ConfigurationError: The role or schema does not exist, or `dsn` is not the owner.
        SchemaNotReadyError: `setup()` has not created the tables in that schema.
    """
    _run(dsn, "grant_app_role", role, schema)


def revoke_app_role(dsn: str, role: str, *, schema: str = "public") -> None:
    """Take back what `grant_app_role` gave (so that the role can be dropped).

    Args:
        dsn: A DSN of the database, connecting as the owner of the tables.
        role: The application role.
        schema: The schema the tables are in.
    """
    _run(dsn, "revoke_app_role", role, schema)
