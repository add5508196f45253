"""Form input the console cannot take is refused with a 400 that says why, and nothing is
done: text Postgres cannot store, JSON Python will not load, fields too long. Each of
these once reached the database or the JSON parser and came back as a 500."""

from __future__ import annotations

import html
from types import ModuleType

from console_host import recheck_builder
from console_world import form_fields, start_plain
from starlette.testclient import TestClient
from test_console_effects import forms, forms_by_key, resolve, row, unknown
from test_console_http import answer, approval_page, waiting

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.effects._protocol import EffectStatus
from langgraph_durable.web._forms import in_form

DEEP = "[" * 20_000 + "]" * 20_000  # under the length cap, deeper than the stack
LONG_NUMBER = "1" * 5_000  # Python refuses integers of more than 4,300 digits
TOO_LONG = "x" * 100_001


def test_bad_resolve_input_is_refused_and_resolves_nothing(world: str, ana: TestClient) -> None:
    unknown(world, "charge:5")
    fields = forms(ana.get("/console/effects").text)[0]
    cases = [
        ({"key64": in_form("charge:5\x00"), "how": "allow_retry"}, "NUL"),
        ({"how": "failed", "reason": "gone\x00"}, "NUL"),
        ({"how": "failed", "reason": TOO_LONG}, "at most 100,000"),
        ({"how": "completed", "result": LONG_NUMBER}, "a number too long or nesting too deep"),
        ({"how": "completed", "result": DEEP}, "a number too long or nesting too deep"),
        ({"how": "completed", "result": f'"{TOO_LONG}"'}, "at most 100,000"),
    ]
    for form, why in cases:
        done = ana.post("/console/effects/resolve", data={**fields, **form})
        assert done.status_code == 400, (form.keys(), done.text[-500:])
        text = html.unescape(done.text)
        assert why in text
        assert "Nothing was done" in text
    assert row(world, "charge:5") == (EffectStatus.UNKNOWN, 1)


def test_bad_answer_input_is_refused_and_sends_nothing(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    thread = start_plain(world, example)
    fields = form_fields(approval_page(ana, thread))
    cases = [
        ({"action": "amend", "amended": '{"amount": ' + LONG_NUMBER + "}"}, "number too long"),
        ({"action": "amend", "amended": '{"amount": ' + DEEP + "}"}, "nesting too deep"),
        ({"action": "amend", "amended": TOO_LONG}, "at most 100,000"),
        ({"action": "approve", "comment": "ok\x00"}, "NUL"),
    ]
    for form, why in cases:
        done = answer(ana, fields, **form)
        assert done.status_code == 400, (form.keys(), done.text[-500:])
        assert why in html.unescape(done.text)
    assert waiting(world, thread) == 1


ODD_IDS = ["a\nb", "a\rb", "a\r\nb", "ünï 🙂 /a?b=c&d#e", " lead ", "x" * 1000, "a+b%20c", "<i>"]


def as_a_browser_posts(fields: dict[str, str]) -> dict[str, str]:
    """What a browser sends for a form's hidden fields: the attribute's text, each line
    break read as LF (HTML's parser) and sent as CRLF (form encoding)."""
    return {
        name: html.unescape(value).replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n")
        for name, value in fields.items()
    }


def test_thread_ids_with_line_breaks_or_odd_text_are_answered_from_the_form(
    world: str, ana: TestClient
) -> None:
    """A form once carried the thread id as text, and a browser sends every line break in
    it as CRLF: a thread id holding CR or LF named another thread, and the answer was
    refused as "answered, or asked again"."""
    with DurablePostgresSaver.from_conn_string(world) as saver:
        graph = recheck_builder().compile(checkpointer=saver)
        for thread in ODD_IDS:
            graph.invoke({"item": "desk"}, {"configurable": {"thread_id": thread}})
    for thread in ODD_IDS:
        fields = as_a_browser_posts(form_fields(approval_page(ana, thread)))
        done = answer(ana, fields, action="approve", comment="really")
        assert done.status_code == 303, (thread[:20], html.unescape(done.text)[-600:])
        assert done.headers["location"] == "/console/?notice=answered"
        assert waiting(world, thread) == 0, thread[:20]


ODD_KEYS = ["pay:\n42", "pay:\r\n42", "pay:\r43", " pay:44 ", "ünï 🙂 <i>&amp; a+b%20c"]


def test_effect_keys_with_line_breaks_or_odd_text_are_resolved_from_the_form(
    world: str, ana: TestClient
) -> None:
    """A resolve form once carried the effect key as text, and a browser sends every line
    break in it as CRLF: a key holding CR or LF could not be resolved from the page, and
    the form of `pay:\\n42` resolved `pay:\\r\\n42`, another effect."""
    for key in ODD_KEYS:
        unknown(world, key)
    for done, key in enumerate(ODD_KEYS, start=1):
        shown = forms_by_key(ana.get("/console/effects").text)
        status, text = resolve(ana, as_a_browser_posts(shown[key][0]), how="allow_retry")
        assert status == 303, (key, text[-600:])
        states = [row(world, k)[0] for k in ODD_KEYS]
        # This effect is resolved, and none that the form did not name.
        assert states == [EffectStatus.RETRY_WAIT] * done + [EffectStatus.UNKNOWN] * (
            len(ODD_KEYS) - done
        ), key


def test_a_resolve_form_without_a_readable_key_is_refused(world: str, ana: TestClient) -> None:
    """A page from before the key was carried in base64 sends it as text, whose line
    breaks the browser may have rewritten: it is refused, not read as another key."""
    unknown(world, "charge:2")
    fields = forms(ana.get("/console/effects").text)[0]
    assert "key64" in fields
    for given in (None, "", "charge:2", "not base64!", "//79"):  # "//79": not UTF-8
        sent = {k: v for k, v in fields.items() if k != "key64"}
        if given is not None:
            sent["key64"] = given
        status, text = resolve(ana, sent, how="allow_retry")
        assert status == 400, (given, text[-500:])
        assert "does not say which effect it resolves" in text
    assert row(world, "charge:2") == (EffectStatus.UNKNOWN, 1)


def test_an_old_pages_plain_key_is_refused_even_when_it_reads_as_base64(
    world: str, ana: TestClient
) -> None:
    """Found by review: an older page sends the key as plain text in the field "key",
    which the base64 form once shared; the plain key 'QUJD' decoded to 'ABC' and resolved
    that other effect. The base64 field has its own name now: the old one is refused with
    a 400 that says to reload, and neither effect is resolved."""
    unknown(world, "QUJD")
    unknown(world, "ABC")
    fields = forms_by_key(ana.get("/console/effects").text)["QUJD"][0]
    old_page = {k: v for k, v in fields.items() if k != "key64"}
    old_page["key"] = "QUJD"
    status, text = resolve(ana, old_page, how="allow_retry")
    assert status == 400, text[-500:]
    assert "older console" in text
    assert "Reload the effects page" in text
    assert row(world, "QUJD") == (EffectStatus.UNKNOWN, 1)
    assert row(world, "ABC") == (EffectStatus.UNKNOWN, 1)


def test_an_answer_form_without_a_readable_thread_is_refused(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    thread = start_plain(world, example)
    fields = form_fields(approval_page(ana, thread))
    for given in (None, "", "not base64!", "//79", thread):  # "//79": not UTF-8
        sent = {k: v for k, v in fields.items() if k != "thread"}
        if given is not None:
            sent["thread"] = given
        refused = answer(ana, sent, action="approve")
        assert refused.status_code == 400, (given, refused.text[-500:])
        assert "does not say which thread it answers" in refused.text
    assert waiting(world, thread) == 1
