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

_URL_PASSWORD = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/?#\s'\"@:]{0,256}:"
    r"(?!\d{1,5}(?:[/?#\s'\"]|\Z))[^\s'\"]{0,256}?@(?=[^\s'\"@/]*(?:[/?#\s'\"]|\Z))"
)
"""A URL's `user:password@` whose password holds what a URL should have escaped (`/`,
`?`, `#`, `@`, as people type them): up to the `@` before the host, the last one before
the path. Not a `host:port/...` (digits then the path), whose query may hold an `@`."""

_CUT_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/?#\s'\"@]*:[^\s'\"@]*\Z")
"""A URL cut short before its `@` (a stored error text is cut to a length), ending the
text: what follows the scheme may be `user:password`."""

_VALUE = r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s,;&'\")}\]]+)"
"""A value: quoted (escaped quotes included) or up to the next space or separator."""

_PASSWORD = re.compile(r"(?P<key>(?:password|passwd|pwd)['\"]?\s*[=:]\s*)" + _VALUE, re.IGNORECASE)
"""`password=...`, `PGPASSWORD=...`, `"password": "..."`, `password: ...`, `Pwd=...`."""

_SECRET_WORD = r"(?:secret|token|api[_-]?key|access[_-]?key|private[_-]?key)"
"""What names a secret, alone or inside a longer name (`client_secret`, `SECRET_KEY`)."""

_SECRET_NAME = _SECRET_WORD + r"(?!s(?![a-z0-9])|izer)[\w-]*"
"""A name holding a secret word, with what follows it (`secret_key`, `SECRET_KEY`,
`api_key_id`, `secretKey`): not a plural or a tokenizer (`max_tokens=4096`)."""

_COMPOUND_NAME = (
    r"(?:[\w-]*[_-](?:secret|token)|(?:secret|token)[_-]|(?:api|access|private)[_-]?key)[\w-]*"
)
"""A name that is an identifier, not a word of prose (`X-Api-Key`, `access_token`,
`secret_key`, `X-Auth-Token`): taken before an unquoted colon too, as in an HTTP header."""

_SECRET = re.compile(
    r"(?P<key>(?:"
    + _SECRET_NAME
    + r"(?:\s*=\s*|['\"]\s*:\s*)|"
    + _COMPOUND_NAME
    + r"\s*:\s*))"
    + _VALUE,
    re.IGNORECASE,
)
"""`api_key=...`, `SECRET_KEY=...`, `"secret": "..."`, `X-Api-Key: ...`: as `key=value`,
a quoted key, or an identifier before a colon, so prose ("a signing secret: set ...",
"token expired") is left as written."""

_AUTHORIZATION = re.compile(
    r"(?P<key>\b(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?"
    r"(?:(?:Bearer|Basic|Token|Digest|Bot|ApiKey|Key)\s+)?)[^\s'\",;]+",
    re.IGNORECASE,
)
"""An `Authorization` header's credential, whatever its scheme (`Token abc`, `abc`)."""

_BEARER = re.compile(r"(?P<key>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
"""An HTTP `Authorization` credential (`Bearer eyJ...`, `Basic dXNlcjpwdw==`)."""


def redact_passwords(text: str) -> str:
    """`text` with every URL's user part shown as `***@`, and the value of every
    password, secret, token or API key, and every bearer credential, as `***`."""
    text = _URL_PASSWORD.sub(r"\g<scheme>***@", text)
    text = _URL_USER.sub(r"\g<scheme>***@", text)
    text = _CUT_URL.sub(r"\g<scheme>***", text)
    text = _AUTHORIZATION.sub(r"\g<key>***", text)
    text = _BEARER.sub(r"\g<key>***", text)
    text = _SECRET.sub(r"\g<key>***", text)
    return _PASSWORD.sub(r"\g<key>***", text)
