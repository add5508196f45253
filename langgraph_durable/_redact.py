"""Passwords out of text that people see: one function every part may use.

An application's exception may quote a DSN or a URL with its password in it
(`postgresql://app:pw@db/prod`, `host=db password=pw`), and operators' tools show stored
error messages (a run's, an effect's) as they are. `redact_passwords` hides a URL's user
part, an `Authorization` credential, and the value of every name that sounds secret, by
the rule checkpoint metadata uses too (`_secret_names.sounds_secret`): `api_key=...` and
`"client_secret": ...` are hidden, `max_tokens=4096` and `'total_token_count': 15` are
counts and stay. The rest of the text stays as written, so the error still says what went
wrong.
"""

from __future__ import annotations

import re

from langgraph_durable._secret_names import sounds_secret

__all__ = ["redact_passwords"]

_NO_IPV6 = r"(?!\[)"
"""After the scheme: an authority opening with `[` is an IPv6 host (`http://[::1]:8080/`),
whose colons are not a `user:password`."""

_URL_USER = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)" + _NO_IPV6 + r"[^/?#\s'\"@]{1,256}@"
)
"""A URL's user part (`user:password@`), which may hold a password or a token."""

_URL_PASSWORD = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)" + _NO_IPV6 + r"[^/?#\s'\"@:]{0,256}:"
    r"(?!\d{1,5}(?:[/?#\s'\"]|\Z))[^\s'\"]{0,256}?@(?=[^\s'\"@/]*(?:[/?#\s'\"]|\Z))"
)
"""A URL's `user:password@` whose password holds what a URL should have escaped (`/`,
`?`, `#`, `@`, as people type them): up to the `@` before the host, the last one before
the path. Not a `host:port/...` (digits then the path), whose query may hold an `@`."""

_CUT_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)" + _NO_IPV6 + r"[^/?#\s'\"@]{0,256}:"
    r"(?!\d{1,5}(?:[/?#]|\Z))[^\s'\"@]*\Z"
)
"""A URL cut short before its `@` (a stored error text is cut to a length), ending the
text: what follows the scheme may be `user:password`. Not a `host:port` or
`host:port/path` ending the text, which has no `@` to come."""

_VALUE = r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s,;&'\")}\]]+)"
"""A value: quoted (escaped quotes included) or up to the next space or separator."""

_PASSWORD = re.compile(r"(?P<key>(?:password|passwd|pwd)['\"]?\s*[=:]\s*)" + _VALUE, re.IGNORECASE)
"""`password=...`, `PGPASSWORD=...`, `"password": "..."`, `password: ...`, `Pwd=...`."""

_NAME = r"[A-Za-z_][\w.-]{0,127}"
"""A name as programs write one: `api_key`, `X-Api-Key`, `llm.max-tokens`, `clientSecret`."""

_NAMED = re.compile(
    r"(?<![\w.])(?:(?P<quote>['\"])(?P<quoted>" + _NAME + r")(?P=quote)[ \t]*:"
    r"|(?P<name>" + _NAME + r")[ \t]*(?P<sep>=(?!=)|:))[ \t]*"
)
"""`name=`, `"name":`, `'name':` or `name:`, up to where the value starts; which of them
hide their value is `_hides`'s decision. The value is read (`_VALUE_AT`) only for those:
reading it for every name would read `x=x=x=...` again from each `x`."""

_VALUE_AT = re.compile(_VALUE)

_HUMP = re.compile(r"[a-z][A-Z]")

_CLASS_OF_ERROR = re.compile(r"(?:Error|Exception|Warning)\Z")
"""A name that ends like an exception's class (`InvalidTokenError`): the error texts shown
are `ClassName: message`, and the message is not that name's value."""

_HEADERS_WHOLE_LINE = frozenset({"cookie", "set-cookie"})
"""Headers whose value is a list (`Cookie: a=1; b=2`), hidden to the end of the line."""

_SCHEME = r"(?:Bearer|Basic|Token|Digest|Bot|ApiKey|Key)"
"""The `Authorization` schemes people write: what follows one is a credential."""

_CREDENTIAL = (
    r"(?:[A-Za-z0-9._~+/=-]{16,}"
    r"|(?=[A-Za-z._~+/=-]*[0-9])(?=[0-9._~+/=-]*[A-Za-z])[A-Za-z0-9._~+/=-]+)"
    r"(?![^\s'\",;)}\]])"
)
"""A word that looks like a credential rather than prose: 16 characters or more of what
tokens are made of, or letters and digits mixed (`4f9`, `sk-live-4f9`); "denied" or
"pending" are not."""

_AUTHORIZATION_VALUE = re.compile(
    r"(?P<key>(?:(?<=['\"])(?:proxy-)?authorization['\"][ \t]*:"
    r"|(?<![\w-])(?:proxy-)?authorization[ \t]*=)"
    r"[ \t]*(?P<open>['\"])?(?:" + _SCHEME + r"[ \t]+)?)"
    r"(?(open)[^'\"\r\n]+|[^\s'\",;&]+)",
    re.IGNORECASE,
)
"""An `Authorization` value set as `authorization=...` or under a quoted key
(`{'Authorization': 'Token abc'}`): a credential whatever it says, its scheme kept."""

_PROSE = (
    r"(?:expired|invalid|missing|required|denied|revoked|malformed|rejected|not|is|was"
    r"|has|have|for|of)(?![^\s'\",;)}\]])"
)
"""Words after a scheme that say something about a credential rather than being one
("authorization: token expired")."""

_AUTHORIZATION_HEADER = re.compile(
    r"(?P<key>(?<![\w-])(?:proxy-)?authorization[ \t]*:[ \t]*)"
    r"(?:(?P<scheme>" + _SCHEME + r"[ \t]+)(?!" + _PROSE + r")[^\s'\",;]+|" + _CREDENTIAL + r")",
    re.IGNORECASE,
)
"""An `Authorization:` header's credential: whatever follows its scheme but a word of prose
(`Authorization: Token user:4f9`), or with no scheme a word that looks like a credential
(`Authorization: 4f9`). Prose ("Authorization: denied for user bob", "authorization:
token expired") is left as written."""

_BEARER = re.compile(r"(?P<key>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
"""An HTTP `Authorization` credential (`Bearer eyJ...`, `Basic dXNlcjpwdw==`)."""


def redact_passwords(text: str) -> str:
    """`text` with every URL's user part shown as `***@`, and as `***` every
    `Authorization` and bearer credential and the value of every name that sounds secret
    (`sounds_secret`): `name=value`, a quoted key, or an identifier before a colon."""
    text = _URL_PASSWORD.sub(r"\g<scheme>***@", text)
    text = _URL_USER.sub(r"\g<scheme>***@", text)
    text = _hide_cut_url(text)
    text = _AUTHORIZATION_VALUE.sub(r"\g<key>***", text)
    text = _AUTHORIZATION_HEADER.sub(_kept_scheme, text)
    text = _BEARER.sub(r"\g<key>***", text)
    text = _hide_named(text)
    return _PASSWORD.sub(r"\g<key>***", text)


def _kept_scheme(found: re.Match[str]) -> str:
    return f"{found['key']}{found['scheme'] or ''}***"


def _hide_named(text: str) -> str:
    """`text` with the value of each name `_hides` hides as `***`. A name kept has its
    value read again, which may itself be `name=value` (`opts=api_key=abc`)."""
    shown: list[str] = []
    position = 0
    while (found := _NAMED.search(text, position)) is not None:
        start = found.end()
        value = _VALUE_AT.match(text, start) if _hides(found) else None
        if value is None:
            shown.append(text[position:start])
            position = start
            continue
        end = _bracketed_end(text, start) or value.end()
        name = found["name"]
        if name is not None and name.lower() in _HEADERS_WHOLE_LINE and value[0] not in "'\"":
            end = _line_end(text, end)
        shown.append(text[position:start])
        shown.append("***")
        position = end
    shown.append(text[position:])
    return "".join(shown)


def _hides(found: re.Match[str]) -> bool:
    """Whether a `name=value` hides its value: exactly when the name sounds secret, and,
    before an unquoted colon, only a name shaped like an identifier (`access_token:`,
    `X-Api-Key:`, `clientSecret:`, `Cookie:`), so prose ("the secret: set it") stays, and
    so does an error's class name before its message (`InvalidTokenError: Not enough
    segments`: a camelCase name that ends like an exception's class is not a key).
    `Authorization` is the `_AUTHORIZATION_*` patterns' to judge."""
    name = found["quoted"] or found["name"]
    if re.sub(r"[\W_]", "", name).lower() in ("authorization", "proxyauthorization"):
        return False
    if found["sep"] == ":" and not (
        "_" in name
        or "-" in name
        or (_HUMP.search(name) is not None and not _CLASS_OF_ERROR.search(name))
        or name.lower() in _HEADERS_WHOLE_LINE
    ):
        return False
    return sounds_secret(name)


def _hide_cut_url(text: str) -> str:
    """`text` with a URL cut short before its `@` (`_CUT_URL`) ending it hidden: looked
    for only from the last `://` of its last word (its scheme is at most 32 characters
    before it), where a long password (a cloud token of thousands) may start; not when
    an `@` follows it (the URL was whole, and `_URL_USER` has judged it)."""
    word = max(text.rfind(c) for c in " \t\r\n'\"") + 1
    separator = text.rfind("://", word)
    if separator < 0 or "@" in text[separator:]:
        return text
    start = max(word, separator - 32)
    return text[:start] + _CUT_URL.sub(r"\g<scheme>***", text[start:], count=1)


BRACKETED_MAX = 10_000
"""Characters a list or dict value under a secret name is read for its closing bracket."""


def _bracketed_end(text: str, start: int) -> int | None:
    """Where a list or dict value starting at `start` ends (`'api_keys': ['sk-1', ...]`:
    the whole value is hidden, where only its bracket was); to the end of the line if its
    closing bracket is not found; None for a value that is not bracketed."""
    if start >= len(text) or text[start] not in "[{":
        return None
    depth, quote, position = 0, "", start
    limit = min(len(text), start + BRACKETED_MAX)
    while position < limit:
        char = text[position]
        if quote:
            if char == "\\":
                position += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return position + 1
        position += 1
    return _line_end(text, start)


def _line_end(text: str, start: int) -> int:
    """Where the line holding `start` ends."""
    ends = [found for found in (text.find("\n", start), text.find("\r", start)) if found >= 0]
    return min(ends, default=len(text))
