# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Approvals that wait for days, across a crash
#
# Northwind refunds $420 for order 8890 (`examples/northwind_refund.py`). The refund needs a
# manager's approval: the run stops at `interrupt()` and waits. Its worker process is killed
# for a deploy that night. The answer comes days later, from another process (here, this
# notebook): `Command(resume=...)` through plain LangGraph, or `resume_approval`, which
# validates the answer before sending it.
#
# Then the same story with a stale order: someone refunds the order by hand while the run
# waits. The approval node revalidates the order before acting and does not refund twice.
#
# The story has its own clock (the `northwind_clock` table), so "three days later" takes no
# time. Every claim is an `assert`.

# %%
import contextlib
import signal
import uuid
from datetime import datetime

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from _helpers import database, example, kill, load_example, show, start, wait_for
from langgraph.types import Command

from langgraph_durable import DurablePostgresSaver, InvalidDecisionError, NotWaitingError
from langgraph_durable.approvals import pending_approvals, resume_approval

northwind = load_example("northwind_refund")
dsn, embedded = database()
stack = contextlib.ExitStack()
saver = stack.enter_context(DurablePostgresSaver.from_conn_string(dsn))
saver.setup()
northwind.reset_world(dsn)  # order 8890: $420, nothing refunded yet
graph = northwind.build(dsn).compile(checkpointer=saver)
timeline: list[tuple[datetime, str, str, float]] = []  # when, what, text side and height


def cli(thread: str, *args: str) -> list[str]:
    return example("northwind_refund.py", "--mode", "sync", "--thread", thread, *args)


def waiting(thread: str) -> list:
    found = pending_approvals(saver, thread_id=thread, only_approvals=True)
    for item in found:
        print(
            f"{item.thread_id} waits for: {item.value['request']}"
            + (f"\n  refused before: {item.value['refused']}" if "refused" in item.value else "")
        )
    return found


EMAILS = "SELECT subject, at FROM northwind_emails WHERE thread_id = %s ORDER BY id"
PAYMENTS = (
    "SELECT id, amount, idempotency_key, at FROM northwind_payments "
    "WHERE order_id = '8890' ORDER BY id"
)

# %% [markdown]
# ## Tuesday 18:00: a worker runs until the approval
#
# The worker (a separate process) finds the order, checks the rules, emails the customer
# that the refund is under review, and stops at the approval. It records a `waiting` event
# and stays up, as a long-lived worker would.

# %%
thread = f"nb-refund-{uuid.uuid4().hex[:6]}"
northwind.set_clock(dsn, "18:00", day=1)
worker = start(cli(thread, "start", "--hold"))
wait_for(
    dsn,
    "SELECT 1 FROM northwind_events WHERE thread_id = %s AND event = 'waiting'",
    (thread,),
    worker,
)
timeline.append((northwind.clock_now(dsn), "waiting for a manager", "left", 3.6))
show(dsn, EMAILS, (thread,), "emails")
assert len(waiting(thread)) == 1

# %% [markdown]
# ## Wednesday 02:00: the worker is SIGKILLed for a deploy
#
# Nothing is left in memory. The question is in Postgres: the thread's latest checkpoint
# holds the pending interrupt, and `pending_approvals` finds it from any process.

# %%
northwind.set_clock(dsn, "02:00", day=2)
assert kill(worker) == -signal.SIGKILL
timeline.append((northwind.clock_now(dsn), f"worker {worker.pid} SIGKILLed", "left", 2.9))
assert len(waiting(thread)) == 1

# %% [markdown]
# ## Friday 09:00, three days later: answers arrive, from this process
#
# First, an answer that does not validate. `resume_approval` checks it before sending
# anything, so the run keeps waiting.

# %%
northwind.set_clock(dsn, "09:00", day=4)
try:
    resume_approval(graph, thread, {"approved": "maybe", "approver": ""})
except InvalidDecisionError as exc:
    print("InvalidDecisionError:", exc)
else:
    raise AssertionError("an invalid decision was sent")
assert len(waiting(thread)) == 1

# %% [markdown]
# Then a team lead approves through plain LangGraph, `Command(resume=...)`. The approval
# node re-runs from its first line (that is how `interrupt()` works), but it only asks: the
# email went out in an earlier node and is not sent again. The `authorize` hook refuses the
# lead (limit $200), and the node asks again with the reason.

# %%
config = {"configurable": {"thread_id": thread}}
result = graph.invoke(
    Command(resume={"approved": True, "approver": "lead-bo"}), config, durability="sync"
)
timeline.append((northwind.clock_now(dsn), "lead-bo refused (over limit)", "right", 3.6))
found = waiting(thread)
assert "lead-bo" in found[0].value["refused"]
assert "payment_id" not in result
assert show(dsn, PAYMENTS, title="payments") == []

# %% [markdown]
# At 11:30 the manager approves with `resume_approval`. The revalidation re-reads the order
# (still refundable), the refund goes out once, and the customer gets the confirmation.

# %%
northwind.set_clock(dsn, "11:30", day=4)
result = resume_approval(
    graph, thread, {"approved": True, "approver": "manager-ana"}, durability="sync"
)
timeline.append((northwind.clock_now(dsn), "manager-ana approves", "left", 3.6))
print({k: result.get(k) for k in ("approval_outcome", "payment_id", "log")})
emails = show(dsn, EMAILS, (thread,), "emails")
payments = show(dsn, PAYMENTS, title="payments")
assert result["approval_outcome"] == "approved"
assert [e["subject"] for e in emails] == ["Refund of $420 under review", "Your $420 refund is done"]
assert len(payments) == 1
assert payments[0]["idempotency_key"] == "refund:8890"
assert waiting(thread) == []

# %% [markdown]
# The same thread can not be approved twice: it waits for nothing now.

# %%
try:
    resume_approval(graph, thread, {"approved": True, "approver": "manager-ana"})
except NotWaitingError as exc:
    print("NotWaitingError:", exc)
else:
    raise AssertionError("a finished thread was resumed")

# %% [markdown]
# The picture: the run outlived its worker by days, and nothing happened twice.

# %%
fig, ax = plt.subplots(figsize=(9, 2.8))
start_at, killed_at, answered_at = timeline[0][0], timeline[1][0], timeline[-1][0]
ax.plot(
    [start_at, killed_at], [3, 3], lw=6, color="tab:gray", solid_capstyle="butt",
    label="worker alive (then SIGKILLed)",
)
ax.plot(
    [start_at, answered_at], [2, 2], lw=6, color="tab:orange", solid_capstyle="butt",
    label="run waiting for the manager",
)
for at, text, side, height in timeline:
    ax.axvline(at, color="black", lw=0.6, ls=":")
    ax.annotate(f" {text} ", (at, height), fontsize=7, ha=side)
ax.scatter(
    [e["at"] for e in emails], [1] * len(emails), marker="v", color="tab:blue", label="email sent"
)
ax.scatter(
    [p["at"] for p in payments], [0] * len(payments), marker="D", color="tab:green",
    label="refund made",
)
ax.set_yticks([3, 2, 1, 0], ["worker process", "run waiting\n(in Postgres)", "emails", "refunds"])
ax.set_ylim(-0.6, 4.1)
ax.xaxis.set_major_formatter(mdates.DateFormatter("%a %H:%M"))
ax.set_title("one email per step, one refund, across a SIGKILL and three days", fontsize=9)
ax.set_xlabel("the story's clock")
ax.legend(fontsize=7, loc="upper left", ncols=2)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## A stale order: refunded by hand while the run waited
#
# A new run for the same order waits for approval (Tuesday the 8th); its worker is killed
# again. On Friday a clerk refunds the order at the till (no key, straight to the payment
# service). On Monday the manager approves. The node's `revalidate` hook re-reads the order
# first: nothing is left to refund, so the run ends as `no_longer_needed` and the refund node
# never runs.

# %%
northwind.reset_world(dsn)
stale = f"nb-stale-{uuid.uuid4().hex[:6]}"
northwind.set_clock(dsn, "18:00", day=8)
worker = start(cli(stale, "start", "--hold"))
wait_for(
    dsn,
    "SELECT 1 FROM northwind_events WHERE thread_id = %s AND event = 'waiting'",
    (stale,),
    worker,
)
assert kill(worker) == -signal.SIGKILL
northwind.set_clock(dsn, "10:00", day=11)
northwind.payment_refund(dsn, "8890", 420, None)  # the clerk, by hand
northwind.set_clock(dsn, "09:00", day=14)
result = resume_approval(
    graph, stale, {"approved": True, "approver": "manager-ana"}, durability="sync"
)
print({k: result.get(k) for k in ("approval_outcome", "payment_id", "log")})
payments = show(dsn, PAYMENTS, title="payments")
emails = show(dsn, EMAILS, (stale,), "emails")
assert result["approval_outcome"] == "no_longer_needed"
assert "refund" not in result["log"]
assert [p["idempotency_key"] for p in payments] == [None]  # only the clerk's refund
assert len(emails) == 1  # "under review"; no confirmation of a refund that did not happen

# %%
stack.close()
if embedded is not None:
    embedded.stop()
