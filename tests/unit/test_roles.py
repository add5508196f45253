"""The application role's grants cover every table, and only rows (langgraph_durable/roles.py)."""

from __future__ import annotations

import re

import pytest

from langgraph_durable import InvalidInputError, app_role_sql
from langgraph_durable._sql import QUERIES, SCHEMA
from langgraph_durable.roles import app_role_privileges

TABLES = set(re.findall(r"^CREATE TABLE (\w+)", SCHEMA, re.MULTILINE))
VERSION_TABLES = {"checkpoint_migrations", "langgraph_durable_migrations"}


def granted(statement: str) -> set[str]:
    """The tables a statement names (the outbox's BIGSERIAL sequence left out)."""
    return {
        name for name in re.findall(r"\{schema\}\.(\w+)", statement) if not name.endswith("_seq")
    }


def test_every_table_is_granted_and_revoked() -> None:
    """A migration that adds a table must add it to the grants, or the app role breaks."""
    assert len(TABLES) >= 9
    assert granted(QUERIES["grant_app_role"]) == TABLES
    assert granted(QUERIES["revoke_app_role"]) == TABLES


def test_the_version_tables_are_read_only_and_nothing_is_ddl() -> None:
    text = "\n".join(
        line for line in QUERIES["grant_app_role"].splitlines() if not line.startswith("--")
    )
    read_only = text.split("GRANT SELECT ON TABLE")[1].split("TO {role}")[0]
    assert granted(read_only) == VERSION_TABLES
    assert not re.search(r"\b(CREATE|ALTER|DROP|TRUNCATE|REFERENCES|TRIGGER|ALL)\b", text)


def test_the_printed_sql_quotes_the_names() -> None:
    printed = app_role_sql('app "worker"', "my schema")
    assert 'TO "app ""worker"""' in printed
    assert '"my schema".checkpoints' in printed


@pytest.mark.parametrize("name", ["", "a\x00b"])
def test_a_role_name_must_be_a_name(name: str) -> None:
    with pytest.raises(InvalidInputError, match="role name"):
        app_role_sql(name)


def test_doctor_checks_what_the_grants_give() -> None:
    """`doctor` checks the privileges read from the grant statement, every table's."""
    found = app_role_privileges()
    tables = {name for kind, name, _ in found if kind == "table"}
    assert tables == TABLES
    writable = TABLES - VERSION_TABLES
    for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE"):
        assert {n for k, n, p in found if k == "table" and p == privilege} >= writable
    assert {(n, p) for k, n, p in found if n in VERSION_TABLES} == {
        (n, "SELECT") for n in VERSION_TABLES
    }
    assert ("sequence", "langgraph_durable_outbox_seq_seq", "USAGE") in found
