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

_CUT_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/?#\s'\"@]*:[^\s'\"@]*\Z")
"""A URL cut short before its `@` (a stored error text is cut to a length), ending the
text: what follows the scheme may be `user:password`."""

_VALUE = r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s,;&'\")}\]]+)"
"""A value: quoted (escaped quotes included) or up to the next space or separator."""

_PASSWORD = re.compile(r"(?P<key>(?:password|passwd|pwd)['\"]?\s*[=:]\s*)" + _VALUE, re.IGNORECASE)
"""`password=...`, `PGPASSWORD=...`, `"password": "..."`, `password: ...`, `Pwd=...`."""

_SECRET = re.compile(
    r"(?P<key>(?:secret|token|api[_-]?key|access[_-]?key)(?:\s*=\s*|['\"]\s*:\s*))" + _VALUE,
    re.IGNORECASE,
)
"""`api_key=...`, `token=...`, `"secret": "..."`: only as `key=value` or a quoted key,
so prose ("a signing secret: set ...") is left as written."""

_BEARER = re.compile(r"(?P<key>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
"""An HTTP `Authorization` credential (`Bearer eyJ...`, `Basic dXNlcjpwdw==`)."""


def redact_passwords(text: str) -> str:
    """`text` with every URL's user part shown as `***@`, and the value of every
    password, secret, token or API key, and every bearer credential, as `***`."""
    text = _URL_USER.sub(r"\g<scheme>***@", text)
    text = _CUT_URL.sub(r"\g<scheme>***", text)
    text = _BEARER.sub(r"\g<key>***", text)
    text = _SECRET.sub(r"\g<key>***", text)
    return _PASSWORD.sub(r"\g<key>***", text)
