"""What a request sends, checked before the console acts on it.

Every text field is at most `FIELD_MAX` characters of text Postgres can store, JSON is
what Python can load, and the resolve forms name the attempt they showed: bad input is a
`Refused` with a 400 that says nothing was done, never a driver error or a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from langgraph_durable._ids import is_text, thread_id_of
from langgraph_durable.errors import InvalidInputError

__all__ = [
    "FIELD_MAX",
    "Refused",
    "attempt_field",
    "decision_input",
    "in_form",
    "json_field",
    "key_field",
    "text_field",
    "thread_field",
    "thread_id_field",
]


class Refused(Exception):
    """A request the console turns down, with the status and the words to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


FIELD_MAX = 100_000
"""Characters a form's text field may hold: far more than a key, a reason, a comment or a
JSON result needs, and a bound on what a request makes the console parse and store."""


def text_field(form: dict[str, Any], name: str, what: str) -> str:
    """A text field of a form, refused (400) if it is longer than `FIELD_MAX` or is not
    text Postgres can store (a NUL, a lone surrogate): the database would refuse it with a
    driver error, a 500, after the page had said nothing."""
    value = form.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Refused(400, f"{what} must be text, not a file. Nothing was done.")
    return _storable(value, what)


def _storable(value: str, what: str) -> str:
    """`value` if Postgres can store it and it is at most `FIELD_MAX` long; else refused."""
    if len(value) > FIELD_MAX:
        raise Refused(
            400,
            f"{what} is {len(value):,} characters long; at most {FIELD_MAX:,} are taken. "
            "Nothing was done.",
        )
    if not is_text(value):
        raise Refused(
            400,
            f"{what} holds a NUL character or a lone surrogate, which Postgres cannot store. "
            "Nothing was done; remove it.",
        )
    return value


def json_field(form: dict[str, Any], name: str, what: str) -> Any:
    """A form field's JSON, refused (400) if it cannot be read: not JSON, or JSON Python
    will not load (an integer of more than 4,300 digits, nesting deeper than the stack)."""
    text = text_field(form, name, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Refused(400, f"{what} must be JSON ({exc.msg}). Nothing was done.") from exc
    except (ValueError, RecursionError) as exc:
        raise Refused(
            400,
            f"{what} cannot be read: a number too long or nesting too deep "
            f"({type(exc).__name__}). Nothing was done.",
        ) from exc


def decision_input(user: str, form: dict[str, Any]) -> dict[str, Any]:
    """The answer an approval form asks for, by `user`, as `validate_decision` takes it.

    Amended fields typed into the form go only with "Approve with changes": pressed
    "Approve" with them filled in, the approver would have approved the request
    unchanged, told it was sent, while believing it changed, so nothing is sent."""
    action = form.get("action")
    if action not in ("approve", "reject", "amend"):
        raise Refused(400, "Choose approve, reject or amend.")
    if action == "approve" and text_field(form, "amended", "Amended fields").strip():
        raise Refused(
            400,
            'You typed amended fields and pressed "Approve", which approves the request '
            'unchanged. Nothing was sent: press "Approve with changes" to send them, or '
            "clear them to approve as asked.",
        )
    comment = text_field(form, "comment", "The comment").strip() or None
    decision: dict[str, Any] = {
        "approved": action != "reject",
        "approver": user,
        "comment": comment,
    }
    if action == "amend":
        amended = json_field(form, "amended", "Amended fields")
        if not isinstance(amended, dict) or not amended:
            raise Refused(400, 'Amended fields must be a JSON object, e.g. {"amount": 300}.')
        decision["amended"] = amended
    return decision


def thread_id_field(text: str) -> str:
    """A thread id from a request, as Postgres can store it (no NUL, no lone surrogate);
    else the page is not found, as for any thread that does not exist.
    An empty one is left to the page, which says what it expected."""
    if not text:
        return text
    try:
        return thread_id_of(text)
    except InvalidInputError as exc:
        raise Refused(404, str(exc)) from exc


def in_form(text: str) -> str:
    """Text as a form's hidden field carries it: URL-safe base64 of its UTF-8. A browser
    rewrites line breaks in a form's values (CR, LF and CRLF are all sent as CRLF), and a
    thread id or an effect key may hold any of them: sent as text, it would name another
    thread or effect (one whose key is the rewritten text)."""
    return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def _from_form(form: dict[str, Any], name: str, what: str) -> str:
    """The text a hidden field carries (`in_form`), or "" if it carries none readable."""
    given = text_field(form, name, what)
    try:
        return base64.b64decode(given, altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # not base64, or not UTF-8
        return ""


def thread_field(form: dict[str, Any]) -> str:
    """The thread an answer form names (`in_form`), as Postgres can store it."""
    text = _from_form(form, "thread", "The thread")
    if not text:
        raise Refused(
            400,
            "The form does not say which thread it answers (a page from an older console?); "
            "nothing was sent. Reload the page and answer again.",
        )
    return thread_id_field(text)


KEY_FIELD = "key64"
"""The resolve form's field with the effect key in base64 (`in_form`). Not "key", which
pages from older consoles send as plain text: a plain key that happens to be base64
("QUJD") would be read as another effect's ("ABC")."""


def key_field(form: dict[str, Any]) -> str:
    """The effect key a resolve form names (`in_form`, in `KEY_FIELD`), as Postgres can
    store it. A form with the key as plain text (a page from an older console, its field
    "key") is refused rather than read as it came: its line breaks may have been
    rewritten into another effect's key, and it may read as base64 of another one."""
    if KEY_FIELD not in form and "key" in form:
        raise Refused(
            400,
            "This form comes from a page of an older console, which names the effect in a "
            "way this one does not read; nothing was changed. Reload the effects page and "
            "resolve again.",
        )
    text = _from_form(form, KEY_FIELD, "The effect key")
    if not text:
        raise Refused(
            400,
            "The form does not say which effect it resolves (a page from an older console?); "
            "nothing was changed. Reload the effects page and resolve again.",
        )
    return _storable(text, "The effect key")


def attempt_field(given: object) -> int:
    """The attempt the page showed, the one the operator checked the receiver for: the
    journal refuses the resolution if the effect moved on to another attempt since. A form
    without it (from a page older than the field) is refused, not resolved blindly."""
    if not isinstance(given, str) or not (given.isascii() and given.isdigit()) or len(given) > 18:
        raise Refused(
            400,
            "The form does not say which attempt of the effect was checked (a page from an "
            "older console?); nothing was changed. Reload the effects page and resolve again.",
        )
    return int(given)
