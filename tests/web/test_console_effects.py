"""Resolving unknown effects from the console: the attempt the operator checked, and
input the page cannot take (refused with 400, never a 500)."""

from __future__ import annotations

import html
import logging
import re

import pytest
from console_host import USER_COOKIE
from console_world import client_for, csrf_of
from starlette.testclient import TestClient

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.effects import EffectJournal, journal_of
from langgraph_durable.effects._protocol import EffectStatus
from langgraph_durable.web._forms import in_form


def journal(saver: DurablePostgresSaver) -> EffectJournal:
    found = journal_of(saver)
    assert isinstance(found, EffectJournal)
    return found


def unknown(dsn: str, key: str) -> None:
    """An effect whose first attempt's outcome is unknown."""
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        attempt = journal(saver).claim(key, "charge", "hash", 30.0, None)
        assert attempt == 1
        journal(saver).mark_unknown(key, attempt, error_type="TimeoutError")


def row(dsn: str, key: str) -> tuple[EffectStatus, int]:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        found = journal(saver).get(key)
    assert found is not None
    return found.status, found.attempt


def forms(page: str) -> list[dict[str, str]]:
    """The hidden fields of each resolve form on the effects page."""
    found = []
    for form in re.findall(r"<form .*?</form>", page, flags=re.S):
        found.append(dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form)))
    return found


def by_hand(client: TestClient, key: str, attempt: int = 1) -> dict[str, str]:
    """A resolve form's fields made by hand, with the CSRF token of `client`'s own page:
    what a user the page shows no form to could post anyway."""
    return {
        "csrf_token": csrf_of(client.get("/console/effects").text),
        "key64": in_form(key),
        "attempt": str(attempt),
    }


def forms_by_key(page: str) -> dict[str, list[dict[str, str]]]:
    """The resolve forms of each unknown effect's card, by the key its heading shows."""
    cards = re.findall(
        r'<div class="card s-unknown effect">\s*<h2><code>(.*?)</code></h2>(.*?)</div>',
        page,
        flags=re.S,
    )
    return {html.unescape(key): forms(card) for key, card in cards}


def resolve(client: TestClient, fields: dict[str, str], **form: str) -> tuple[int, str]:
    done = client.post("/console/effects/resolve", data={**fields, **form})
    return done.status_code, html.unescape(done.text)


def test_each_resolve_form_names_the_attempt_shown_and_a_later_one_is_not_settled(
    world: str, ana: TestClient
) -> None:
    unknown(world, "charge:9")
    page = ana.get("/console/effects").text
    shown = forms(page)
    assert len(shown) == 3
    assert {f["attempt"] for f in shown} == {"1"}
    # While the page is open, attempt 1 is allowed a retry, attempt 2 starts and its
    # outcome is unknown too: nobody checked the receiver for attempt 2.
    with DurablePostgresSaver.from_conn_string(world) as saver:
        assert journal(saver).allow_retry("charge:9", 1, resolved_by="cli")
        assert journal(saver).take_over("charge:9", 1, EffectStatus.RETRY_WAIT, 30.0) == 2
        journal(saver).mark_unknown("charge:9", 2, error_type="TimeoutError")
    status, text = resolve(ana, shown[1], how="completed", result='{"charge_id": 7}')
    assert status == 409, text
    assert "at attempt 2 now, not at attempt 1" in text
    assert "nothing was changed" in text
    assert row(world, "charge:9") == (EffectStatus.UNKNOWN, 2)
    # The reloaded page names attempt 2, and resolves it.
    status, text = resolve(ana, forms(ana.get("/console/effects").text)[0], how="allow_retry")
    assert status == 303, text
    assert row(world, "charge:9") == (EffectStatus.RETRY_WAIT, 2)


def test_a_resolve_form_without_the_attempt_is_refused_and_resolves_nothing(
    world: str, ana: TestClient
) -> None:
    """A page from before the field: resolving "whatever attempt is current" could settle
    one nobody checked."""
    unknown(world, "charge:8")
    fields = forms(ana.get("/console/effects").text)[0]
    for attempt in (None, "", "one", "²", "9" * 40):
        sent = {k: v for k, v in fields.items() if k != "attempt"}
        if attempt is not None:
            sent["attempt"] = attempt
        status, text = resolve(ana, sent, how="allow_retry")
        assert status == 400, (attempt, text)
        assert "Reload the effects page" in text
    assert row(world, "charge:8") == (EffectStatus.UNKNOWN, 1)


def test_a_form_shown_to_one_user_does_not_act_for_the_next_in_that_browser(
    world: str, ana: TestClient
) -> None:
    """The CSRF token is tied to the signed-in user as well as the browser's session: after
    someone else signs in in the same browser, a page left open from before is refused."""
    unknown(world, "charge:7")
    fields = forms(ana.get("/console/effects").text)[0]
    ana.cookies.set(USER_COOKIE, "lead-bo")  # the same session cookie, another user
    status, text = resolve(ana, fields, how="allow_retry")
    assert status == 403, text
    assert "belongs to another session or user" in text
    assert row(world, "charge:7") == (EffectStatus.UNKNOWN, 1)
    status, text = resolve(ana, forms(ana.get("/console/effects").text)[0], how="allow_retry")
    assert status == 303, text  # lead-bo's own page


async def ops_only(user: str) -> bool:
    """An async `may_resolve` (a lookup in a staff directory, say)."""
    return user == "ops-lead"


def test_an_async_may_resolve_hook_is_awaited_and_refuses_whom_it_says(world: str) -> None:
    """The hook's coroutine was once taken for its answer: a coroutine is truthy, so every
    signed-in user could resolve effects."""
    unknown(world, "charge:6")
    for intern in client_for(world, "intern", may_resolve=ops_only):
        page = html.unescape(intern.get("/console/effects").text)
        assert "Resolving is not shown: you (intern) may not resolve effects." in page
        assert forms(page) == []
        status, text = resolve(intern, by_hand(intern, "charge:6"), how="failed", reason="x")
        assert status == 403, text
        assert "intern may not resolve effects. Nothing was changed." in text
    assert row(world, "charge:6") == (EffectStatus.UNKNOWN, 1)
    for lead in client_for(world, "ops-lead", may_resolve=ops_only):
        status, text = resolve(lead, forms(lead.get("/console/effects").text)[0], how="allow_retry")
        assert status == 303, text
    assert row(world, "charge:6") == (EffectStatus.RETRY_WAIT, 1)


def operators_only(user: str) -> bool | str:
    """`may_resolve` in the package's hook convention, as `authorize` takes it: True, or
    the reason why not."""
    return user == "ops-lead" or f"{user} is not an operator"


def test_a_may_resolve_hook_that_gives_a_reason_refuses_with_it(world: str) -> None:
    """The reason is a non-empty string, which is truthy: the console once took the hook's
    truth for permission, so a hook in the package's own convention let everyone resolve."""
    unknown(world, "charge:4")
    for intern in client_for(world, "intern", may_resolve=operators_only):
        page = html.unescape(intern.get("/console/effects").text)
        assert (
            "Resolving is not shown: you (intern) may not resolve effects: intern is not an "
            "operator." in page
        )
        assert forms(page) == []  # no buttons that would each end in a 403
        status, text = resolve(intern, by_hand(intern, "charge:4"), how="allow_retry")
        assert status == 403, text
        assert (
            "intern may not resolve effects: intern is not an operator. Nothing was changed."
            in text
        )
    assert row(world, "charge:4") == (EffectStatus.UNKNOWN, 1)
    for lead in client_for(world, "ops-lead", may_resolve=operators_only):
        status, text = resolve(lead, forms(lead.get("/console/effects").text)[0], how="allow_retry")
        assert status == 303, text
    assert row(world, "charge:4") == (EffectStatus.RETRY_WAIT, 1)


STAFF = {"ops-lead": {"role": "ops"}}


def staff_entry(user: str) -> object:
    """A `may_resolve` written as `user -> bool` that returns a truthy dict entry."""
    return STAFF.get(user)


def test_a_may_resolve_hook_returning_neither_true_nor_a_reason_says_so(
    world: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by review: a truthy verdict that is neither True nor a string refused without
    a word, so the hook's author could not tell why nobody may resolve. The page and the
    403 name what the hook returned; the log warns once per console, not on every page."""
    unknown(world, "charge:2")
    caplog.set_level(logging.WARNING, logger="langgraph_durable.web._console")
    expected = "the may_resolve hook returned dict; it must return True, or the reason why not"
    for lead in client_for(world, "ops-lead", may_resolve=staff_entry):
        page = html.unescape(lead.get("/console/effects").text)
        assert f"you (ops-lead) may not resolve effects: {expected}" in page
        assert forms(page) == []
        status, text = resolve(lead, by_hand(lead, "charge:2"), how="allow_retry")
        assert status == 403, text
        assert expected in html.unescape(text)
        lead.get("/console/effects")
    warnings = [r for r in caplog.records if "may_resolve hook returned dict" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert row(world, "charge:2") == (EffectStatus.UNKNOWN, 1)


def directory_down(user: str) -> bool:
    """A `may_resolve` whose staff directory is down."""
    raise LookupError("the staff directory is down")


def test_a_may_resolve_hook_that_raises_is_named_and_resolves_nothing(world: str) -> None:
    unknown(world, "charge:3")
    for lead in client_for(world, "ops-lead", may_resolve=directory_down):
        page = html.unescape(lead.get("/console/effects").text)
        assert "cannot check who may resolve effects: LookupError" in page
        assert forms(page) == []
        status, text = resolve(lead, by_hand(lead, "charge:3"), how="allow_retry")
        assert status == 500, text
        assert "may_resolve hook raised LookupError" in text
        assert "Nothing was changed" in text
    assert row(world, "charge:3") == (EffectStatus.UNKNOWN, 1)
