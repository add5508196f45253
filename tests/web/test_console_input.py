"""Form input the console cannot take is refused with a 400 that says why, and nothing is
done: text Postgres cannot store, JSON Python will not load, fields too long. Each of
these once reached the database or the JSON parser and came back as a 500."""

from __future__ import annotations

import html
from types import ModuleType

from console_world import form_fields, start_plain
from starlette.testclient import TestClient
from test_console_effects import forms, row, unknown
from test_console_http import answer, approval_page, waiting

from langgraph_durable.effects._protocol import EffectStatus

DEEP = "[" * 20_000 + "]" * 20_000  # under the length cap, deeper than the stack
LONG_NUMBER = "1" * 5_000  # Python refuses integers of more than 4,300 digits
TOO_LONG = "x" * 100_001


def test_bad_resolve_input_is_refused_and_resolves_nothing(world: str, ana: TestClient) -> None:
    unknown(world, "charge:5")
    fields = forms(ana.get("/console/effects").text)[0]
    cases = [
        ({"key": "charge:5\x00", "how": "allow_retry"}, "NUL"),
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
