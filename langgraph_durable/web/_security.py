"""Who is asking, and whether a form really came from one of our pages.

- **Authentication** is the host application's: the console takes a callable that maps a
  request to a user name (or None, not signed in). That name becomes the approver of
  every answer, and the graph's `authorize` hook judges it.
- **CSRF**: each browser gets a random session id in an HttpOnly, SameSite=Strict cookie;
  every form carries `HMAC(secret, session id, user)`. A POST without the cookie, without
  the token, or with a token of another session or of another user (the browser signed in
  as someone else since the page was shown) is refused before anything is read or done.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import secrets
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

__all__ = [
    "SESSION_COOKIE",
    "Authenticate",
    "csrf_token",
    "csrf_valid",
    "current_user",
    "ensure_session",
    "new_secret",
]

SESSION_COOKIE = "lgd_console_session"

Authenticate = Callable[[Request], "str | Awaitable[str | None] | None"]


def new_secret() -> bytes:
    """A secret for one process: tokens stop working when it restarts (pass your own)."""
    return secrets.token_bytes(32)


def session_of(request: Request) -> str | None:
    value = request.cookies.get(SESSION_COOKIE)
    return value if value and len(value) <= 100 else None


def ensure_session(request: Request) -> str:
    """This browser's session id; a new one (set on the response) if it has none."""
    found = session_of(request)
    if found is None:
        found = secrets.token_urlsafe(32)
        request.state.new_session = found
    return found


def set_session_cookie(request: Request, response: Response) -> None:
    """Send the cookie made by `ensure_session`, scoped to where the console is mounted."""
    new = getattr(request.state, "new_session", None)
    if new is not None:
        response.set_cookie(
            SESSION_COOKIE,
            new,
            path=request.scope.get("root_path") or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )


def csrf_token(secret: bytes, session: str, user: str | None) -> str:
    """The token of a session's forms for one signed-in user (None: nobody). JSON keeps
    the two apart: no session and user pair spells another's."""
    signed = json.dumps(["csrf", session, user]).encode()
    return hmac.new(secret, signed, hashlib.sha256).hexdigest()


def csrf_valid(secret: bytes, request: Request, given: object, user: str | None) -> bool:
    """Whether a form's token belongs to the session of the browser that sent it, and to
    the user signed in now: a page shown to one user does not act for the next."""
    session = session_of(request)
    if session is None or not isinstance(given, str) or not given:
        return False
    return hmac.compare_digest(csrf_token(secret, session, user), given)


async def current_user(authenticate: Authenticate | None, request: Request) -> str | None:
    """The signed-in user as the host application says, or None."""
    if authenticate is None:
        return None
    found = authenticate(request)
    if inspect.isawaitable(found):
        found = await found
    if found is not None and (not isinstance(found, str) or not found.strip()):
        return None  # a hook that returns something odd signs nobody in
    return found
