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
# # Durability modes: what each costs per step, and what each loses in a crash
#
# LangGraph takes the mode from `invoke(..., durability=...)`:
#
# - `"sync"` saves each step's checkpoint before the next step starts;
# - `"async"` (LangGraph's default) saves it in the background while the next step runs;
# - `"exit"` saves only when the run ends.
#
# Both halves are measured live on the database this notebook runs against: first the cost
# per step (the benchmark in `benchmarks/durability_modes.py`, ours against upstream's
# `PostgresSaver` in both of its setups: one connection and a pool), then a real crash in each mode (the seven-step workflow of
# `examples/seven_step_workflow.py`, SIGKILLed before step 7 and resumed by a new process).

# %%
import json
import uuid

import matplotlib.pyplot as plt
from _helpers import (
    database,
    example,
    kill,
    load_example,
    load_file,
    print_rows,
    query,
    start,
    wait_for,
)

bench = load_file("benchmarks/durability_modes.py")
seven = load_example("seven_step_workflow")
dsn, embedded = database()
MODES = ["sync", "async", "exit"]

# %% [markdown]
# ## 1. Cost per step
#
# A 10-node graph with 10 channels, invoked on fresh threads; the median time of one invoke
# divided by its 10 steps, the savers taking turns. "none" is the graph without a
# checkpointer; each ratio is against the faster of upstream's two setups in that mode. Few
# runs, so expect noise; `python benchmarks/durability_modes.py` takes more.

# %%
results = bench.measure(dsn, runs=10)
print(bench.table(results))
cost = {(name, mode): ms for name, mode, ms in results}
ours = {mode: cost[(bench.OURS, mode)] for mode in MODES}
assert ours["exit"] < ours["sync"]  # saving once per run is cheaper than once per step

# %%
savers = bench.SAVERS
fig, ax = plt.subplots(figsize=(8, 3))
width = 0.2
for i, name in enumerate(savers):
    xs = [m + (i - 1.5) * width for m in range(len(MODES))]
    ax.bar(xs, [cost[(name, mode)] for mode in MODES], width, label=name)
ax.axhline(cost[("none", "-")], color="black", lw=0.8, ls="--", label="graph alone")
ax.set_xticks(range(len(MODES)), [f'durability="{m}"' for m in MODES])
ax.set_xlabel("durability mode")
ax.set_ylabel("ms per step (median)")
ax.legend(fontsize=7)
ax.set_title("what each mode costs per step", fontsize=9)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. What a crash loses
#
# One run per mode, at the same time: each worker runs steps 1 to 6, writes a marker row
# when it reaches step 7 and waits. When all three markers are there, each worker is
# SIGKILLed, the thread's checkpoints are counted, and a new process per mode finishes the
# run (from the last checkpoint, or from the same input when there is none).

# %%
threads = {mode: f"nb-{mode}-{uuid.uuid4().hex[:6]}" for mode in MODES}
seven.setup(dsn)


def command(mode: str) -> list[str]:
    return example(
        "seven_step_workflow.py", "--thread", threads[mode], "--mode", mode
    )


workers = {mode: start([*command(mode), "worker", "--stop-before", "notify"]) for mode in MODES}
for mode, proc in workers.items():
    wait_for(dsn, "SELECT 1 FROM seven_markers WHERE thread_id = %s", (threads[mode],), proc)
saved = {}
for mode, proc in workers.items():
    kill(proc)
    saved[mode] = query(
        dsn, "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", (threads[mode],)
    )[0]["n"]
resumes = {mode: start([*command(mode), "worker"]) for mode in MODES}
finals = {}
for mode, proc in resumes.items():
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    finals[mode] = json.loads(out.strip().splitlines()[-1])

# %%
rows = []
for mode in MODES:
    found = seven.collect(dsn, threads[mode])
    first = workers[mode].pid
    second = finals[mode]["pid"]
    counts = [len(found[k]) for k in ("deals", "tasks", "notifications")]
    rows.append(
        {
            "mode": mode,
            "checkpoints at kill": saved[mode],
            "resumed from": finals[mode]["started_from"],
            "steps run again": len(
                [s for s in seven.STEPS[:-1] if [s, second] in found["step_runs"]]
            ),
            "replays": found["ledger"]["replays"],
            "tokens billed again": sum(t for _, p, t in found["model_bill"] if p == second),
            "tokens saved": found["ledger"]["saved_total_tokens"],
            "deal/task/note": "/".join(map(str, counts)),
            "claims hold": all(seven.check(found, first, second, mode).values()),
        }
    )
print_rows(rows, "after the crash and the resume, per mode")
by_mode = {row["mode"]: row for row in rows}

for row in rows:  # in every mode: nothing paid twice, nothing done twice
    assert row["claims hold"], row
    assert row["tokens billed again"] == 0
    assert row["deal/task/note"] == "1/1/1"
assert by_mode["sync"]["steps run again"] == 0
assert by_mode["sync"]["resumed from"] == "checkpoint"
assert by_mode["exit"]["checkpoints at kill"] == 0
assert by_mode["exit"]["steps run again"] == 6
assert by_mode["exit"]["resumed from"] == "input"
assert by_mode["exit"]["tokens saved"] > 0

# %% [markdown]
# - `"sync"`: every finished step was in Postgres before the next began; the new process
#   resumed at step 7 and nothing ran again.
# - `"async"`: the background saves had almost always finished by the time of the kill on a
#   local server, so usually nothing ran again; on a slow or distant database the last
#   steps' saves can be lost, and those steps run again.
# - `"exit"`: nothing was saved. The new process sent the input again and all six steps ran
#   again; the effect journal replayed the model calls and the CRM writes, so no token was
#   paid twice and no deal or task was made twice.
#
# In every mode the outside world saw one deal, one task and one notification.

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3))
left.bar(MODES, [ours[m] for m in MODES], color="tab:blue", label="DurablePostgresSaver")
left.set_xlabel("durability mode")
left.set_ylabel("ms per step")
left.legend(fontsize=7)
left.set_title("cost per step (DurablePostgresSaver)", fontsize=9)
right.bar(
    MODES,
    [by_mode[m]["steps run again"] for m in MODES],
    color="tab:orange",
    label="steps run again",
)
for i, mode in enumerate(MODES):
    row = by_mode[mode]
    right.annotate(
        f"{row['tokens saved']} tokens saved\n{row['tokens billed again']} billed "
        f"again\ndeal/task/note: {row['deal/task/note']}",
        (i, row["steps run again"]),
        xytext=(0, 4),
        textcoords="offset points",
        ha="center",
        fontsize=7,
    )
right.set_ylim(0, 8.5)
right.set_xlabel("durability mode")
right.set_ylabel("steps run again after SIGKILL")
right.legend(fontsize=7, loc="upper left")
right.set_title("what a crash before step 7 costs", fontsize=9)
fig.tight_layout()
plt.show()

# %%
if embedded is not None:
    embedded.stop()
