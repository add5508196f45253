"""Passwords out of text that people see: one function every part may use.

An application's exception may quote a DSN or a URL with its password in it
(`postgresql://app:pw@db/prod`, `host=db password=pw`), and operators' tools show stored
error messages (a run's, an effect's) as they are. `redact_passwords` hides a URL's user
part and the value of every `password=` / `password:` it finds; the rest of the text stays
as written, so the error still says what went wrong.
"""

from __future__ import annotations

import re

__all__ = ["redact_passwords"]

_URL_USER = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/?#\s'\"@]{1,256}@")
"""A URL's user part (`user:password@`), which may hold a password or a token."""

_PASSWORD = re.compile(
    r"(?P<key>password['\"]?\s*[=:]\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^\s,;&'\")}\]]+)",
    re.IGNORECASE,
)
"""`password=...`, `PGPASSWORD=...`, `"password": "..."`, the value quoted or not."""


def redact_passwords(text: str) -> str:
    """`text` with every URL's user part shown as `***@` and every password's value as
    `***`."""
    text = _URL_USER.sub(r"\g<scheme>***@", text)
    return _PASSWORD.sub(r"\g<key>***", text)
