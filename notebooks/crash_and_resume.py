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
# # Crash and resume, with real processes
#
# A seven-step sales workflow (`examples/seven_step_workflow.py`): fetch the account, ask a
# model to qualify the lead, search the playbooks, create a CRM deal, create a task for the
# manager, ask the model to draft a note, notify the manager.
#
# A worker process runs it. When it reaches step 7 it writes a marker row and waits; this
# notebook sees the marker and kills the worker with `SIGKILL` (no cleanup, like an OOM kill
# or a deploy). A second process finishes the run. Between the steps we look at the tables:
# the effect journal, the CRM, the model provider's bill.
#
# The run uses `durability="exit"`: LangGraph saves no checkpoint until the run ends, so the
# crash loses the whole run and the new process must send the input again. That is the hard
# case: all seven steps run again. Every claim below is an `assert`.

# %%
import json
import signal
import subprocess
import textwrap
import uuid

import matplotlib.pyplot as plt
from _helpers import database, example, kill, load_example, show, start, wait_for

seven = load_example("seven_step_workflow")
dsn, embedded = database()
seven.setup(dsn)
thread = f"nb-deal-{uuid.uuid4().hex[:8]}"
MODE = "exit"
worker = example("seven_step_workflow.py", "--thread", thread, "--mode", MODE)
print("thread", thread)

# %% [markdown]
# ## 1. A worker runs steps 1 to 6, then waits before step 7
#
# `--stop-before notify` makes the worker write a row to `seven_markers` when step 7 starts
# and then wait. The notebook waits for that row (a real signal, not a timer).

# %%
first = start([*worker, "worker", "--stop-before", "notify"])
wait_for(dsn, "SELECT 1 FROM seven_markers WHERE thread_id = %s", (thread,), first)
print(f"worker {first.pid} is waiting before step 7")

# %% [markdown]
# What the outside world has seen so far: the steps the worker started, its model calls on
# the provider's bill, one deal and one task in the CRM, no notification.

# %%
JOURNAL = """
SELECT node, effect_name, status, attempt, replays, usage ->> 'total_tokens' AS tokens
FROM langgraph_durable_effects WHERE thread_id = %s ORDER BY step, created_at
"""
show(
    dsn,
    "SELECT step, pid FROM seven_step_runs WHERE thread_id = %s ORDER BY id",
    (thread,),
    "steps started",
)
journal_before = show(dsn, JOURNAL, (thread,), "the effect journal")
bill_before = show(
    dsn,
    "SELECT step, pid, total_tokens FROM seven_model_bill WHERE thread_id = %s ORDER BY id",
    (thread,),
    "the model provider's bill",
)
show(
    dsn,
    "SELECT 'deals' AS receiver, count(*) FROM seven_crm_deals WHERE thread_id = %(t)s "
    "UNION ALL SELECT 'tasks', count(*) FROM seven_crm_tasks WHERE thread_id = %(t)s "
    "UNION ALL SELECT 'notifications', count(*) FROM seven_notifications "
    "WHERE thread_id = %(t)s",
    {"t": thread},
    "the receivers",
)
checkpoints = show(
    dsn,
    "SELECT count(*) AS checkpoints FROM checkpoints WHERE thread_id = %s",
    (thread,),
    "checkpoints of the thread",
)

assert [r["status"] for r in journal_before] == ["completed"] * 4
assert len(bill_before) == 2
assert checkpoints[0]["checkpoints"] == 0  # durability="exit": nothing saved yet

# %% [markdown]
# ## 2. SIGKILL

# %%
code = kill(first)
print(f"worker {first.pid} exited with {code}")
assert code == -signal.SIGKILL

# %% [markdown]
# ## 3. A new process finishes the run
#
# It finds no checkpoint, so it sends the same input again, and every step runs again. The
# effects are journaled under keys derived from where they are called (thread, node, step,
# call), which come out the same: the model calls and the CRM writes are replayed from the
# journal instead of being made again. Only step 7 acts.

# %%
done = subprocess.run([*worker, "worker"], capture_output=True, text=True, check=True)
final = json.loads(done.stdout.strip().splitlines()[-1])
second = final["pid"]
print(
    f"worker {second} started from the {final['started_from']}; notification:",
    final["notification"],
)
assert final["started_from"] == "input"

# %%
journal_after = show(dsn, JOURNAL, (thread,), "the effect journal")
show(
    dsn,
    "SELECT receiver, pid FROM seven_receiver_calls WHERE thread_id = %s ORDER BY id",
    (thread,),
    "every call that reached a receiver",
)
bill_after = show(
    dsn,
    "SELECT step, pid, total_tokens FROM seven_model_bill WHERE thread_id = %s ORDER BY id",
    (thread,),
    "the model provider's bill",
)

assert bill_after == bill_before  # no model call reached the provider again
assert [r["replays"] for r in journal_after if r["node"] != "notify"] == [1, 1, 1, 1]

# %% [markdown]
# ## 4. The report, and the token ledger
#
# `token_ledger(saver, thread_id)` adds up the tokens of journaled model calls and the
# tokens that replays did not pay again.

# %%
found = seven.collect(dsn, thread)
print(found["ledger"])
ok = seven.print_report(found, first.pid, second, MODE)
assert ok
assert found["ledger"]["saved_total_tokens"] == sum(r["total_tokens"] for r in bill_before) > 0
assert len(found["deals"]) == len(found["tasks"]) == len(found["notifications"]) == 1

# %% [markdown]
# ## 5. The picture
#
# Each dot is a step as the outside world saw it, for each process: red where the provider
# billed tokens or a receiver was called, green where the journal replayed the result, grey
# where a read ran again.

# %%
STYLE = {
    "billed": ("tab:red", "o"),
    "created": ("tab:red", "o"),
    "replayed": ("tab:green", "s"),
    "ran": ("tab:gray", "o"),
    "killed": ("black", "X"),
}
fig, ax = plt.subplots(figsize=(10, 3.4))
for row, pid in enumerate([first.pid, second]):
    for x, step in enumerate(seven.STEPS, 1):
        text = seven.describe(found, step, pid)
        kind = next((k for k in STYLE if k in text), None)
        if kind is None:
            continue
        color, marker = STYLE[kind]
        ax.scatter(x, row, s=160, color=color, marker=marker, zorder=3)
        ax.annotate(
            textwrap.fill(text, 13),
            (x, row),
            fontsize=7,
            xytext=(0, 12),
            textcoords="offset points",
            ha="center",
            va="bottom",
        )
legend = {
    "billed": "acted, or a model call paid for",
    "replayed": "replayed from the journal",
    "ran": "ran (a read)",
    "killed": "killed before it acted",
}
for kind, label in legend.items():
    color, marker = STYLE[kind]
    ax.scatter([], [], s=80, color=color, marker=marker, label=label)
ax.legend(fontsize=7, loc="upper left", ncols=4)
ax.set_xlabel("step")
ax.set_yticks([0, 1], [f"killed worker\n{first.pid}", f"new worker\n{second}"])
ax.set_xticks(range(1, 8), [s.replace("_", "\n") for s in seven.STEPS], fontsize=8)
ax.set_ylim(-0.5, 2.3)
ax.grid(axis="x", alpha=0.3)
saved = found["ledger"]["saved_total_tokens"]
ax.set_title(
    f'durability="{MODE}": every step ran again; {saved} tokens saved, '
    "one deal, one task, one notification",
    fontsize=9,
)
fig.tight_layout()
plt.show()

# %%
if embedded is not None:
    embedded.stop()
