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
# # A fleet of workers, one killed: the others finish its runs
#
# Twelve refunds are queued as runs in Postgres (`examples/worker_fleet.py`). Each run is a
# graph of four steps: look up the order, refund it at the payment service, mail the
# customer, close the ticket. The refund and the mail are `@effect`s. The payment service
# and the mailer are tables that record every call; neither deduplicates, so only the effect
# journal (and a `reconcile=` hook that asks the service by key) keeps each to one call.
#
# Three worker processes run `Worker(saver, [refunds]).run_forever()`. We SIGKILL the second
# one in the middle of a run, at the worst moment: inside its refund call, after the payment
# service recorded the refund and before the journal knew (so that the kill lands there
# every time, that worker pauses at this point in its first refund; the notebook waits for
# that state in the database, then kills it). The other two finish the queue and, once the
# dead worker's lease has run out, its run.
#
# Workers are named `worker-1` to `worker-3` and orders numbered 1 to 12, so the tables read
# the same on every run; times differ. Every claim is an `assert`.

# %%
import signal
import uuid
from collections import Counter

import matplotlib.pyplot as plt
from _helpers import database, load_example, print_rows, query

fleet = load_example("worker_fleet")
dsn, embedded = database()
fleet.setup(dsn)
batch = uuid.uuid4().hex[:8]
COUNT = 12
VICTIM = fleet.VICTIM
print(f"{COUNT} runs, workers {', '.join(fleet.WORKERS)}, lease {fleet.LEASE_S:g} s")


def worker_name(owner):
    """`worker-2@batch` (the id in the database) as `worker-2`."""
    return owner.split("@")[0] if owner else None


# %% [markdown]
# ## 1. Three workers start and announce themselves
#
# Each worker is a process of its own (`python examples/worker_fleet.py worker ...`); the DSN
# reaches it through the environment (`LANGGRAPH_DURABLE_DSN`), never its command line. A
# worker writes a row to `langgraph_durable_workers` with the graph versions it runs; that
# row is how the notebook knows it is ready, and how workers block runs of a version no live
# worker runs.

# %%
procs = fleet.start_fleet(dsn, batch)
workers = print_rows(
    [
        {
            "worker": worker_name(r["worker_id"]),
            "graph": r["graphs"][0]["name"].split("-")[0],
            "versions": ", ".join(r["graphs"][0]["versions"]),
        }
        for r in query(
            dsn,
            "SELECT worker_id, graphs FROM langgraph_durable_workers "
            "WHERE worker_id LIKE %s ORDER BY worker_id",
            (f"%@{batch}",),
        )
    ],
    "workers in langgraph_durable_workers",
)
assert [w["worker"] for w in workers] == fleet.WORKERS

# %% [markdown]
# ## 2. Twelve runs are queued
#
# `RunRegistry(saver).create(refunds, {"order_no": n}, thread_id=...)` writes a `pending` run
# pinned to the graph's name and version, and wakes the workers (LISTEN/NOTIFY). They take
# runs with `FOR UPDATE SKIP LOCKED`, each with its thread's lease at a new fencing token.

# %%
created = fleet.create_runs(dsn, batch, COUNT)
print_rows(
    [
        {
            "order": r.metadata["order_no"],
            "thread": r.thread_id.replace(batch, "…"),
            "version": r.graph_version,
            "status": r.status.value,
            "durability": r.durability,
        }
        for r in created[:3]
    ],
    f"the first 3 of {len(created)} runs, as created",
)
assert [r.status.value for r in created] == ["pending"] * COUNT

# %% [markdown]
# ## 3. Worker 2 refunds an order and is SIGKILLed
#
# The notebook waits until the database shows worker 2 owning a running run whose first step
# is committed (`step` ≥ 1) and whose refund the payment service has recorded. At that moment
# the journal's row for the refund is `running`: the attempt started, its outcome is not
# recorded.

# %%
victim_order = fleet.wait_for_victim(dsn, batch, procs)
thread = f"{batch}-order-{victim_order}"
RUN = """
SELECT owner, status, step, attempt, fencing_token,
    round(extract(epoch FROM lease_expires_at - clock_timestamp())::numeric, 1) AS lease_left_s
FROM langgraph_durable_runs WHERE thread_id = %s
"""
JOURNAL = """
SELECT node, effect_name, status, attempt, resolved_by FROM langgraph_durable_effects
WHERE thread_id = %s ORDER BY step
"""


def run_row():
    return [{**r, "owner": worker_name(r["owner"])} for r in query(dsn, RUN, (thread,))]


before = print_rows(run_row(), f"the run of order {victim_order}")
journal_before = print_rows(query(dsn, JOURNAL, (thread,)), "its effects in the journal")
refunds_before = print_rows(
    query(
        dsn,
        "SELECT order_no, worker FROM wf_refunds WHERE batch = %s AND order_no = %s",
        (batch, victim_order),
    ),
    "its refund at the payment service",
)
assert before[0]["owner"] == VICTIM
assert before[0]["status"] == "running"
assert [j["status"] for j in journal_before] == ["running"]
assert refunds_before == [{"order_no": victim_order, "worker": VICTIM}]

# %%
code, killed_at = fleet.kill(dsn, procs.pop(VICTIM))
print(f"{VICTIM} exited with {code}")
assert code == -signal.SIGKILL

# %% [markdown]
# Nothing tells the database that worker 2 died. Its run stays `running` under its lease
# until the lease runs out (3 s here; `Worker(lease_seconds=30)` by default); a live worker
# beats every third of it, so a slow run is never taken from a worker that still runs it.

# %% [markdown]
# ## 4. The others finish every run
#
# `RunRegistry.wait_for(run_id)` waits for a run to finish (on notifications, looking again
# every second); the notebook waits until all twelve have. Then it stops the two workers with
# SIGTERM: a worker takes no new run after `stop()`, and one stopped in the middle of a run
# hands it back to the queue at once (here they are idle).

# %%
fleet.wait_all(dsn, batch, [r.run_id for r in created], procs, victim_order, progress=False)
codes = fleet.stop_fleet(procs)
print("exit codes after SIGTERM:", codes)
assert codes == {"worker-1": 0, "worker-3": 0}

found = fleet.collect(dsn, batch)
finished_by = fleet.finished_by(found)
runs = print_rows(
    [
        {
            "order": r["order_no"],
            "status": r["status"],
            "executions": r["attempt"],
            "finished by": finished_by.get(r["order_no"]),
        }
        for r in found["runs"]
    ],
    "every run",
)
assert [r["status"] for r in runs] == ["success"] * COUNT
assert VICTIM not in finished_by.values()
assert {r["order"]: r["executions"] for r in runs if r["executions"] != 1} == {victim_order: 2}

# %% [markdown]
# ## 5. The killed run, step by step
#
# Every step each worker started for that order, with the time since the kill. Worker 2 ran
# the lookup and started the refund; after its lease ran out another worker took the run at
# a new fencing token and resumed it from its last checkpoint (after the lookup, which does
# not run again). The refund node ran again, but the journal held an attempt of a dead
# process with no outcome: its `reconcile` hook asked the payment service by key, found the
# refund, and recorded it instead of refunding again.

# %%
steps = print_rows(
    [
        {
            "node": s["node"],
            "worker": s["worker"],
            "since kill (s)": round((s["at"] - killed_at).total_seconds(), 1),
        }
        for s in found["wf_steps"]
        if s["order_no"] == victim_order
    ],
    f"steps of order {victim_order}",
)
journal_after = print_rows(query(dsn, JOURNAL, (thread,)), "its effects in the journal")
taker, recovered_after = fleet.recovery(found, victim_order, killed_at)
print(f"taken over by {taker}, {recovered_after:.1f} s after the kill")
assert [s["node"] for s in steps] == ["look_up", "refund", "refund", "notify", "close"]
assert [s["worker"] for s in steps[:2]] == [VICTIM, VICTIM]
assert {s["worker"] for s in steps[2:]} == {taker} != {VICTIM}
assert [(j["node"], j["status"], j["resolved_by"]) for j in journal_after] == [
    ("refund", "completed", "reconcile"),
    ("notify", "completed", None),
]

# %% [markdown]
# ## 6. What the outside world saw: each key delivered once
#
# The payment service and the mailer record every call with the idempotency key it came
# with. Twelve orders, twelve refunds, twelve mails; no key twice.

# %%
delivered = print_rows(
    [
        {
            "receiver": label,
            "calls": len(found[table]),
            "distinct keys": len(fleet.deliveries(found, table)),
            "orders": len({r["order_no"] for r in found[table]}),
            "most calls for one key": max(fleet.deliveries(found, table).values()),
        }
        for label, table in (("payment service", "wf_refunds"), ("mailer", "wf_mails"))
    ],
    "deliveries",
)
assert all(d["calls"] == d["distinct keys"] == d["orders"] == COUNT for d in delivered)
assert all(d["most calls for one key"] == 1 for d in delivered)
assert fleet.print_report(found, COUNT, victim_order, killed_at)

# %% [markdown]
# ## 7. The picture
#
# Each marker is a step a worker started, at its time since the runs were created. Worker 2's
# row stops at the kill; the killed run's steps are ringed in black, on both sides of the gap
# its lease leaves.

# %%
start = min(r["created_at"] for r in found["runs"])
colors = {"look_up": "tab:gray", "refund": "tab:red", "notify": "tab:blue", "close": "tab:green"}
rows = {name: i for i, name in enumerate(fleet.WORKERS)}
fig, ax = plt.subplots(figsize=(11, 3.4))
for node, color in colors.items():
    mine = [s for s in found["wf_steps"] if s["node"] == node]
    ax.scatter(
        [(s["at"] - start).total_seconds() for s in mine],
        [rows[s["worker"]] + 0.08 * fleet.NODES.index(node) - 0.12 for s in mine],
        s=28,
        color=color,
        label=node,
        zorder=3,
    )
ringed = [s for s in found["wf_steps"] if s["order_no"] == victim_order]
ax.scatter(
    [(s["at"] - start).total_seconds() for s in ringed],
    [rows[s["worker"]] + 0.08 * fleet.NODES.index(s["node"]) - 0.12 for s in ringed],
    s=120,
    facecolors="none",
    edgecolors="black",
    linewidths=1.2,
    label=f"order {victim_order} (killed run)",
    zorder=4,
)
kill_x = (killed_at - start).total_seconds()
ax.axvline(kill_x, color="black", linestyle="--", linewidth=1, label=f"SIGKILL {VICTIM}")
ax.axvspan(kill_x, kill_x + recovered_after, color="tab:orange", alpha=0.15, label="until taken over")
ax.set_yticks(list(rows.values()), list(rows))
ax.set_ylim(-0.6, len(rows) - 0.4)
ax.set_xlabel("seconds since the runs were created")
ax.set_ylabel("worker process")
ax.set_title(
    f"{COUNT} runs, {VICTIM} SIGKILLed mid-run: {taker} resumed its run "
    f"{recovered_after:.1f} s later; every refund and mail sent once",
    fontsize=9,
)
ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
ax.grid(axis="x", alpha=0.3)
fig.tight_layout()
assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
assert {t.get_text() for t in ax.get_legend().get_texts()} >= {*colors, f"SIGKILL {VICTIM}"}
victim_steps = [s for s in found["wf_steps"] if s["worker"] == VICTIM]
assert all(s["at"] < killed_at for s in victim_steps)  # nothing from worker 2 after the kill
plt.show()

# %% [markdown]
# The count per worker depends on who woke first; what does not change: every run succeeds,
# the killed one with a second execution by another worker, and the receivers saw each key
# once.

# %%
print(Counter(finished_by.values()))
if embedded is not None:
    embedded.stop()
