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
# # Unknown outcomes: a crash in the middle of a payment call
#
# A checkout (`examples/payment_crash.py`): check the cart, charge the card, ship, write the
# receipt. The charge is an `@effect`. Before each attempt the effect journal commits a row
# (key, attempt, lease); the result is stored when the call returns.
#
# A worker dies after the payment service charged the card and before the response came
# back. Nobody knows, from the journal alone, whether the card was charged. A blind retry
# could charge twice; skipping could ship unpaid goods. langgraph-durable does neither:
#
# 1. without a hook, the resumed run stops with `EffectOutcomeUnknown` and an operator
#    settles it (`langgraph-durable effects`, then `resolve`);
# 2. with a `reconcile=` hook, the resumed run asks the payment service by key by itself.
#
# The payment service is a table that does not deduplicate: it only stores the key as
# metadata, so it can be searched by key. Every claim is an `assert`.

# %%
import json
import signal
import subprocess
import sys
import uuid

from _helpers import database, example, kill, load_example, show, start, wait_for
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from langgraph_durable import EffectJournal

pay = load_example("payment_crash")
dsn, embedded = database()
pay.setup(dsn)

JOURNAL = """
SELECT key, status, attempt, resolved_by, replays, split_part(lease_owner, ':', 2) AS owner_pid
FROM langgraph_durable_effects WHERE thread_id = %s
"""
CHARGES = "SELECT id, amount_cents, metadata_key, pid FROM pay_charges WHERE thread_id = %s"


def checkout(reconcile: bool = False) -> tuple[str, list[str]]:
    thread = f"nb-checkout-{uuid.uuid4().hex[:6]}"
    cmd = example("payment_crash.py", "--thread", thread)
    return thread, [*cmd, "--reconcile"] if reconcile else cmd


def operator_cli(*args: str) -> str:
    """`langgraph-durable ...`, the operator's command, as its own process."""
    done = subprocess.run(
        [sys.executable, "-m", "langgraph_durable.cli", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


# %% [markdown]
# ## 1. No hook: the worker dies inside the call
#
# `--hold in-call` makes the charge wait after the payment service committed. The notebook
# waits for the charge row to appear at the payment service (the signal), then SIGKILLs.

# %%
thread, worker = checkout()
first = start([*worker, "worker", "--hold", "in-call"])
wait_for(dsn, "SELECT 1 FROM pay_charges WHERE thread_id = %s", (thread,), first)
assert kill(first) == -signal.SIGKILL
charges = show(dsn, CHARGES, (thread,), "the payment service: the card was charged")
journal = show(dsn, JOURNAL, (thread,), "the journal: an attempt by a dead process, no outcome")
assert len(charges) == 1
assert journal[0]["status"] == "running"
assert journal[0]["owner_pid"] == str(first.pid)

# %% [markdown]
# A new process resumes the thread. The lease's owner is a dead process on this host, so the
# attempt is known to be over, but its outcome is not, and the effect has no way to ask. The
# run stops with `EffectOutcomeUnknown` (the worker exits with code 4) and marks the row
# `unknown`. The card is not charged again.

# %%
resumed = subprocess.run([*worker, "worker"], capture_output=True, text=True, check=False)
print("exit code", resumed.returncode, resumed.stdout.strip())
key = json.loads(resumed.stdout.strip().splitlines()[-1])["unknown_key"]
assert resumed.returncode == pay.EXIT_OUTCOME_UNKNOWN
journal = show(dsn, JOURNAL, (thread,), "the journal")
assert journal[0]["status"] == "unknown"
assert len(show(dsn, CHARGES, (thread,), "the payment service")) == 1

# %% [markdown]
# ## 2. The operator's view
#
# `langgraph-durable effects` lists what needs attention: effects running, unknown, deferred
# or waiting to retry. From Python the same list is `EffectJournal.open_effects`.

# %%
print("$ langgraph-durable effects --thread", thread)
print(operator_cli("effects", "--thread", thread))

with ConnectionPool(dsn, kwargs={"autocommit": True, "row_factory": dict_row}, open=True) as pool:
    journal_api = EffectJournal(pool)
    open_effects = journal_api.open_effects(thread_id=thread)
    print([(e["key"], e["status"], e["attempt"], e["node"]) for e in open_effects])
assert [e["key"] for e in open_effects] == [key]

# %% [markdown]
# The operator asks the payment service for a charge with that key in its metadata, finds
# it, and records it as the effect's result. The next resume replays that result: the run
# ships and writes the receipt, and the card is charged once.

# %%
charge_id = pay.find_charge(dsn, key)
print(f"the payment service has charge {charge_id} under key {key}")
assert charge_id == charges[0]["id"]
print(f"$ langgraph-durable resolve {key} --completed '{{\"charge_id\": {charge_id}}}'")
print(operator_cli("resolve", key, "--completed", json.dumps({"charge_id": charge_id})))

done = subprocess.run([*worker, "worker"], capture_output=True, text=True, check=True)
print(json.loads(done.stdout.strip().splitlines()[-1])["receipt"])
journal = show(dsn, JOURNAL, (thread,), "the journal")
found = pay.report(dsn, thread)
assert journal[0]["status"] == "completed"
assert journal[0]["resolved_by"] == "operator"
assert len(found["charges"]) == 1
assert len(found["shipments"]) == 1
assert operator_cli("effects", "--thread", thread) == "no open effects"

# %% [markdown]
# ## 3. With a `reconcile=` hook, nobody has to be woken up
#
# ```python
# def charge_reconciled(idempotency_key, order_id, amount_cents):
#     found = find_charge(dsn, idempotency_key)
#     return Reconciled.completed({"charge_id": found}) if found else Reconciled.absent()
#
# @effect(name="payments.charge", reconcile=charge_reconciled)
# def charge_card(order_id, amount_cents, idempotency_key=""): ...
# ```
#
# Same crash: the card was charged, the worker died. On resume the hook finds the charge by
# key and the journal stores it (`resolved_by = reconcile`).

# %%
thread, worker = checkout(reconcile=True)
first = start([*worker, "worker", "--hold", "in-call"])
wait_for(dsn, "SELECT 1 FROM pay_charges WHERE thread_id = %s", (thread,), first)
assert kill(first) == -signal.SIGKILL
done = subprocess.run([*worker, "worker"], capture_output=True, text=True, check=True)
journal = show(dsn, JOURNAL, (thread,), "the journal")
charges = show(dsn, CHARGES, (thread,), "the payment service")
assert journal[0]["status"] == "completed"
assert journal[0]["resolved_by"] == "reconcile"
assert journal[0]["attempt"] == 1
assert len(charges) == 1

# %% [markdown]
# And when the worker died after the journal row committed but before the call reached the
# payment service (`--hold before-call`; the signal is the journal's `running` row), the hook
# finds nothing, and a second attempt charges the card once.

# %%
thread, worker = checkout(reconcile=True)
first = start([*worker, "worker", "--hold", "before-call"])
wait_for(
    dsn,
    "SELECT 1 FROM langgraph_durable_effects WHERE thread_id = %s AND status = 'running'",
    (thread,),
    first,
)
assert kill(first) == -signal.SIGKILL
assert show(dsn, CHARGES, (thread,), "the payment service, after the crash") == []
done = subprocess.run([*worker, "worker"], capture_output=True, text=True, check=True)
journal = show(dsn, JOURNAL, (thread,), "the journal")
charges = show(dsn, CHARGES, (thread,), "the payment service")
assert journal[0]["status"] == "completed"
assert journal[0]["attempt"] == 2
assert len(charges) == 1
assert charges[0]["pid"] != first.pid

# %% [markdown]
# In all three endings the card was charged exactly once. An outcome that cannot be known is
# never guessed: it is asked about (a hook) or decided by a person (the CLI), and the run
# resumes with `invoke(None, config)`, never by sending the input again, which would start a
# new run with new keys.

# %%
if embedded is not None:
    embedded.stop()
