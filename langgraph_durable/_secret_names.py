"""Which names sound like they hold a secret: one rule for metadata and for error texts.

Two places hide values by their name: a checkpoint's metadata (`MetadataRedaction`, where
LangGraph copies a run's `configurable`) and the error texts the CLI and the console show
(`_redact.redact_passwords`, which hides `name=value`). They use this one rule, so that a
name hidden in one is hidden in the other, and a count of tokens a model reports
(`max_tokens`, `total_token_count`, `x-ratelimit-remaining-tokens`) is shown in both.
"""

from __future__ import annotations

import functools
import re

__all__ = ["COUNTED_TOKENS", "SECRET_WORDS", "TOKEN_KINDS", "TOKEN_MEASURES", "sounds_secret"]

SECRET_WORDS = (
    "apikey",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "authorization",
    "cookie",
    "privatekey",
    "accesskey",
    "bearer",
)
"""A name containing one of these, lowercased and without separators ("API-Key" reads
"apikey"), sounds secret; so does a name that names a token (`_names_a_token`). A
constant: decisions are cached per name, so `MetadataRedaction(redact=...)` is the way to
change the rule for metadata."""

TOKEN_MEASURES = frozenset(
    {
        "budget",
        "count",
        "limit",
        "max",
        "maximum",
        "min",
        "minimum",
        "num",
        "number",
        "quota",
        "remaining",
        "spent",
        "total",
        "usage",
        "used",
    }
)
"""Words that make a name with "token" or "tokens" in it a count or a limit (`max_tokens`,
`token_count`, `token_usage`): LangChain's model settings and usage, not a credential."""

COUNTED_TOKENS = frozenset(
    {
        "cached",
        "completion",
        "context",
        "input",
        "new",
        "output",
        "per",
        "prompt",
        "ratelimit",
        "reasoning",
    }
)
"""Words that make a name a count only beside the plural "tokens" (`input_tokens`,
`max_new_tokens`, `tokens_per_minute`, a provider's `x-ratelimit-reset-tokens`):
`input_token` or `cached_token` may hold one, and `reset_tokens` may be a list of them.
With "details" they name a count's breakdown whatever the number (`input_token_details`,
LangChain's usage), where `token_details` may hold a credential."""

TOKEN_KINDS = frozenset(
    {
        "access",
        "api",
        "auth",
        "bearer",
        "client",
        "csrf",
        "id",
        "jwt",
        "oauth",
        "personal",
        "private",
        "refresh",
        "session",
        "xsrf",
    }
)
"""Words that make a name with "token" in it a credential whatever else it says
(`access_token_limit` sounds secret: a wrong guess here only hides a value)."""


@functools.lru_cache(maxsize=4096)
def sounds_secret(name: str) -> bool:
    """Whether `name` contains one of `SECRET_WORDS` or names a token. Cached: every
    checkpoint carries the same few metadata keys ("source", "step", "parents" and the
    run's configurable), and error texts repeat the same few names."""
    words = _words(name)
    joined = "".join(words)
    if any(word in joined for word in SECRET_WORDS):
        return True
    return "token" in joined and _names_a_token(words)


def _words(name: str) -> list[str]:
    """A name's words, lowercased: split at separators and at camelCase humps
    ("maxTokens", "MAX_TOKENS", "llm.max-tokens" all give "max", "tokens")."""
    return [
        part.lower()
        for chunk in re.split(r"[\W_]+", name)
        for part in _CAMEL_HUMP.split(chunk)
        if part
    ]


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _names_a_token(words: list[str]) -> bool:
    """Whether a name with "token" in it names a credential rather than a count or a limit.

    A count or a limit says so, and names no kind of credential (`TOKEN_KINDS`): "tokens"
    on its own, "token"/"tokens" with a word of `TOKEN_MEASURES`, or "tokens" with a word
    of `COUNTED_TOKENS`. Anything else is taken for a credential: "token", "access_token",
    "github_token", "input_token", and "token" run together with another word
    ("accesstoken", "tokenizer"), where nothing tells the two apart."""
    others = [word for word in words if word not in ("token", "tokens")]
    if any("token" in word for word in others) or not TOKEN_KINDS.isdisjoint(others):
        return True
    plural = "tokens" in words
    if not others:
        return not plural or "token" in words
    if "details" in others and not COUNTED_TOKENS.isdisjoint(others):
        return False  # `input_token_details`, `completion_tokens_details`
    measures = TOKEN_MEASURES | COUNTED_TOKENS if plural else TOKEN_MEASURES
    return measures.isdisjoint(others)
