"""The console in a real headless browser (Debian's chromium, driven by Playwright).

The Northwind story at 09:00: the refund run for order 8890 waits for a manager; the
worker that ran it was SIGKILLed overnight and another worker is up. lead-bo (may approve
up to $200) signs in and is refused; manager-ana signs in, opens the inbox and approves.
The new worker resumes the run: one refund, one confirmation. A second click from a stale
page approves nothing. Each page is saved as a screenshot (the path is printed).

In CI (CI=true) a missing chromium or Playwright fails the test; elsewhere it skips.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest
from console_world import csrf_of
from test_console_effects import row, unknown

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, RunStatus
from langgraph_durable.approvals import pending_approvals
from langgraph_durable.effects._protocol import EffectStatus

HERE = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _missing(what: str) -> None:
    message = f"{what}; install it (apt-get install -y chromium; pip install playwright)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs the browser tests: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright is not installed")
    if not Path(CHROMIUM).exists():
        _missing(f"no chromium at {CHROMIUM}")
    with sync_playwright() as p:
        found = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield found
        found.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    where = Path(os.environ.get("LANGGRAPH_DURABLE_SCREENSHOTS") or tmp_path / "screenshots")
    where.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {where}")
    return where


def worker(dsn: str, name: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LANGGRAPH_DURABLE_DSN": dsn, "PYTHONPATH": str(HERE)}
    return subprocess.Popen([sys.executable, str(HERE / "northwind_worker.py"), name], env=env)


def sign_in(browser: Any, base: str, user: str) -> Any:
    page = browser.new_context().new_page()
    page.goto(f"{base}/login")
    page.fill("#user-name", user)
    page.click("#sign-in")
    page.wait_for_url(f"{base}/console/")
    return page


def test_a_manager_approves_the_northwind_refund_once_after_the_worker_was_killed(
    world: str, example: ModuleType, browser: Any, console: str, shots: Path
) -> None:
    from playwright.sync_api import expect

    thread = "northwind-8890"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        registry = RunRegistry(saver)
        graph = example.build(world).compile(checkpointer=saver)
        run = registry.create(
            GraphVersion("northwind", "1", graph),
            {"thread": thread, "order_id": "8890", "amount": 420, "log": []},
            thread_id=thread,
        )
        first = worker(world, "worker-evening")
        assert registry.wait_for(run.run_id).status is RunStatus.INTERRUPTED
        first.send_signal(signal.SIGKILL)  # the overnight deploy
        assert first.wait() == -signal.SIGKILL
        second = worker(world, "worker-morning")
        try:
            # lead-bo may approve up to $200: the page says so and offers no buttons.
            bo = sign_in(browser, console, "lead-bo")
            expect(bo.locator("#user")).to_have_text("lead-bo")
            expect(bo.get_by_text("not you: may approve up to $200")).to_be_visible()
            bo.screenshot(path=shots / "01-inbox-lead-bo.png", full_page=True)
            bo.click(f"text={thread}")
            expect(bo.get_by_role("button", name="Approve")).to_have_count(0)
            bo.screenshot(path=shots / "02-approval-lead-bo.png", full_page=True)
            # manager-ana signs in, opens the inbox, approves.
            ana = sign_in(browser, console, "manager-ana")
            expect(ana.get_by_text("you (manager-ana) may answer")).to_be_visible()
            ana.screenshot(path=shots / "03-inbox-manager-ana.png", full_page=True)
            ana.click(f"text={thread}")
            expect(ana.locator("pre.payload")).to_contain_text('"amount": 420')
            stale = ana.context.new_page()
            stale.goto(ana.url)
            ana.screenshot(path=shots / "04-approval-manager-ana.png", full_page=True)
            # lead-bo posts ana's form anyway, with a token of lead-bo's own session: the
            # graph's authorize hook refuses before anything is sent.
            question = ana.locator("input[name=question]").first.input_value()
            refused = bo.request.post(
                f"{console}/console/approval/answer",
                form={
                    "csrf_token": csrf_of(bo.content()),
                    "thread": ana.locator("input[name=thread]").first.input_value(),
                    "question": question,
                    "action": "approve",
                },
            )
            assert refused.status == 403
            bo.set_content(refused.text())
            expect(bo.locator("#message")).to_contain_text(
                "lead-bo may not answer this: may approve up to $200. Nothing was sent."
            )
            bo.screenshot(path=shots / "05-lead-bo-refused.png", full_page=True)
            ana.fill("textarea[name=comment]", "ok, refund 8890")
            ana.get_by_role("button", name="Approve", exact=True).click()
            expect(ana.get_by_role("status")).to_have_text(
                "Your answer was sent; a worker resumes the run."
            )
            ana.screenshot(path=shots / "06-approved.png", full_page=True)
            # The morning worker resumes the run: wait for it in the database.
            assert registry.wait_for(run.run_id).status is RunStatus.SUCCESS
            # A second click, from the page loaded before the answer: nothing happens.
            stale.get_by_role("button", name="Approve", exact=True).click()
            expect(stale.locator("#message")).to_contain_text("answered, or asked again")
            stale.screenshot(path=shots / "07-second-click-refused.png", full_page=True)
            ana.goto(f"{console}/console/")
            expect(ana.locator("#empty")).to_have_text("Nothing is waiting for an answer.")
            ana.screenshot(path=shots / "08-inbox-empty.png", full_page=True)
            ana.goto(f"{console}/console/runs")
            expect(ana.locator("#status-success")).to_be_visible()
            ana.screenshot(path=shots / "09-runs.png", full_page=True)
            ana.goto(f"{console}/console/runs/{run.run_id}")
            expect(ana.locator("#status")).to_have_text("success")
            ana.screenshot(path=shots / "10-run.png", full_page=True)
            ana.click(f"text={thread}")
            expect(ana.locator("#timeline")).to_contain_text("refund: completed, attempt 1")
            ana.screenshot(path=shots / "11-thread-timeline.png", full_page=True)
            ana.goto(f"{console}/console/effects")
            expect(ana.locator("#no-unknown")).to_be_visible()
            ana.screenshot(path=shots / "12-effects.png", full_page=True)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait()
        assert pending_approvals(saver, thread_id=thread) == []
    with psycopg.connect(world) as conn:
        payments = conn.execute("SELECT amount FROM northwind_payments").fetchall()
        emails = conn.execute(
            "SELECT subject FROM northwind_emails WHERE thread_id = %s ORDER BY id", (thread,)
        ).fetchall()
    assert payments == [(420,)]
    assert [e[0] for e in emails] == ["Refund of $420 under review", "Your $420 refund is done"]
    assert len(list(shots.glob("*.png"))) == 12


def test_effects_whose_keys_hold_line_breaks_are_resolved_from_the_browser(
    world: str, browser: Any, console: str, shots: Path
) -> None:
    """An operator allows a retry on each unknown effect in turn. Chromium sends a form's
    line breaks as CRLF: with the key carried as text, the first card (`pay:\\n42`)
    resolved `pay:\\r\\n42`, another effect, and the others were refused."""
    from playwright.sync_api import expect

    keys = ["pay:\n42", "pay:\r\n42", "pay:\r43"]
    for key in keys:
        unknown(world, key)
    ops = sign_in(browser, console, "ops-olga")
    for left in range(len(keys), 0, -1):
        ops.goto(f"{console}/console/effects")
        expect(ops.locator("div.effect")).to_have_count(left)
        ops.locator("div.effect").first.get_by_role("button", name="allow a retry").click()
        expect(ops.get_by_role("status")).to_have_text(
            "The effect was resolved; resume its thread (or retry its run)."
        )
    expect(ops.locator("#no-unknown")).to_be_visible()
    # In a folder of its own: the Northwind story counts its screenshots.
    ops.screenshot(path=shots / "effect-keys" / "resolved.png", full_page=True)
    assert [row(world, key) for key in keys] == [(EffectStatus.RETRY_WAIT, 1)] * len(keys)
