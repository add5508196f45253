"""The results of `benchmarks/run.py` as a markdown table, a targets check and a plot."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench_async import AsyncResult
from bench_common import SETUP_LABELS, Stats, best_upstream
from bench_data import ReadResults, StorageResult
from bench_processes import ProcessesResult
from bench_runs import RunsResults

T = TypeVar("T")

MODES = ("sync", "async", "exit")
STEPS_PER_INVOKE = 10
"""Steps of one invoke of the benchmarks' 10-node graph: throughput is stored per invoke."""


@dataclass
class Results:
    """Everything one run measured; a scenario left out is None."""

    machine: dict[str, str]
    settings: dict[str, Any]
    steps: dict[tuple[str, str], Stats] | None = None
    throughput: dict[tuple[str, int], Stats] | None = None
    async_runs: dict[tuple[str, int], AsyncResult] | None = None
    async_gc: dict[tuple[str, int], AsyncResult] | None = None
    """The async scenario under the README's GC setting (`settings["async_gc_thresholds"]`)."""
    large: dict[tuple[str, str, int], Stats] | None = None
    reads: ReadResults | None = None
    storage: dict[str, StorageResult] | None = None
    effects: dict[str, Stats] | None = None
    processes: dict[tuple[str, int], ProcessesResult] | None = None
    processes_async: dict[tuple[str, int], ProcessesResult] | None = None
    """Worker processes each running async runs on one event loop (`processes` uses threads)."""
    runs: RunsResults | None = None
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    scenario: str
    unit: str
    ours: str
    baseline: str
    ratio: str
    notes: str = ""
    setup: str = "-"
    """Which of upstream's setups was the baseline (the faster one in this run)."""


@dataclass(frozen=True)
class Target:
    name: str
    measured: float | None
    goal: float
    at_most: bool
    bound: float | None = None
    """The best ratio any saver could reach here, measured in the same run, if known."""
    why: str = ""
    """Why a target that fails misses, from this run's own numbers, and the command whose
    profile shows where the time goes ("" when the numbers it needs were not measured)."""

    @property
    def passed(self) -> bool | None:
        if self.measured is None:
            return None
        return self.measured <= self.goal if self.at_most else self.measured >= self.goal

    def gap(self) -> str:
        if self.measured is None:
            return "not measured"
        if self.passed:
            return "-"
        if not self.measured:
            return "ours measured 0"
        if self.at_most:
            return f"needs {1 - self.goal / self.measured:.0%} less"
        return f"needs {self.goal / self.measured:.2f}x more"


def _ms(stats: Stats) -> str:
    return f"{stats.median:.3f} (p95 {stats.p95:.3f})"


def _ratio(ours: float, baseline: float) -> str:
    if not baseline:  # nothing measured to compare with: report it, do not crash the run
        return "n/a"
    return f"{ours / baseline:.2f}x"


def _size(n: int) -> str:
    return f"{n:,}"


def rows(results: Results) -> list[Row]:
    """One row per scenario measurement; ratios are ours / baseline."""
    out: list[Row] = []
    steps = results.steps
    if steps is not None:
        best = {mode: best_upstream(steps, mode) for mode in MODES}
        sync_best, sync_setup = best["sync"]
        out.append(
            Row(
                "graph alone (no checkpointer)",
                "ms/step",
                _ms(steps[("none", "-")]),
                "-",
                "-",
                "the 10-node graph's own cost",
            )
        )
        out.append(
            Row(
                "LangGraph with a no-op checkpointer, durability=sync",
                "ms/step",
                _ms(steps[("noop", "sync")]),
                "-",
                "-",
                "the floor for any saver: LangGraph's own checkpointing work",
            )
        )
        if ("one_commit", "sync") in steps:
            floor = steps[("one_commit", "sync")]
            out.append(
                Row(
                    "LangGraph with a saver that only commits one single-row INSERT per step, "
                    "durability=sync",
                    "ms/step",
                    _ms(floor),
                    _ms(sync_best),
                    _ratio(floor.median, sync_best.median),
                    "the floor for any saver that makes each step durable before the next",
                    SETUP_LABELS[sync_setup],
                )
            )
        if ("statement_only", "sync") in steps:
            drop_in = steps[("statement_only", "sync")]
            out.append(
                Row(
                    "LangGraph with a saver that only runs our put statement (upstream's rows, "
                    "a step's writes) with precomputed parameters, durability=sync",
                    "ms/step",
                    _ms(drop_in),
                    _ms(sync_best),
                    _ratio(drop_in.median, sync_best.median),
                    "the floor for a drop-in saver: no Python around one statement per step",
                    SETUP_LABELS[sync_setup],
                )
            )
        for mode in MODES:
            mine, (theirs, setup) = steps[("ours", mode)], best[mode]
            fast = steps[("ours_async_commit", mode)]
            out.append(
                Row(
                    f"per step, durability={mode}",
                    "ms/step",
                    _ms(mine),
                    _ms(theirs),
                    _ratio(mine.median, theirs.median),
                    f"ours with async_commit=True: {fast.median:.3f} "
                    f"({_ratio(fast.median, theirs.median)})"
                    + _other_setup(steps, mode, setup)
                    + _statement_floor(steps, mode, theirs.median),
                    SETUP_LABELS[setup],
                )
            )
    pool_size = results.settings.get("pool_size", 16)  # runs before it was recorded: 16
    if results.throughput is not None:
        levels = sorted({level for _, level in results.throughput})
        for level in levels:
            mine = results.throughput[("ours", level)]
            theirs, setup = best_upstream(results.throughput, level, higher_is_better=True)
            ceiling = results.throughput.get(("noop", level))
            out.append(
                Row(
                    f"throughput, {level} concurrent thread{'s' if level > 1 else ''}",
                    "steps/s",
                    f"{mine.median * STEPS_PER_INVOKE:,.0f}",
                    f"{theirs.median * STEPS_PER_INVOKE:,.0f}",
                    _ratio(mine.median, theirs.median),
                    f"durability=sync, pools of {pool_size}; invokes/s ours {mine.median:.1f}, "
                    f"upstream {theirs.median:.1f}"
                    + _other_setup(
                        results.throughput, level, setup, steps_per_invoke=STEPS_PER_INVOKE
                    )
                    + (
                        ""
                        if ceiling is None
                        else f"; no-op checkpointer (the ceiling in one process) "
                        f"{ceiling.median * STEPS_PER_INVOKE:,.0f} = "
                        f"{_ratio(ceiling.median, theirs.median)}"
                    ),
                    SETUP_LABELS[setup],
                )
            )
    out += _async_rows(results.async_runs, pool_size)
    out += _async_rows(results.async_gc, pool_size, f", {gc_label(results.settings)}", p99=False)
    out += _large_rows(results.large)
    if results.reads is not None:
        stats = results.reads.stats
        sizes = sorted({size for _, _, size in stats})
        for op, label in (("latest", "latest get_tuple"), ("list10", "list(limit=10)")):
            for size in sizes:
                mine = stats[("ours", op, size)]
                theirs, setup = best_upstream(stats, op, size)
                migrated = stats[("upstream_migrated", op, size)]
                out.append(
                    Row(
                        f"{label}, thread of {_size(size)} checkpoints",
                        "ms",
                        _ms(mine),
                        _ms(theirs),
                        _ratio(mine.median, theirs.median),
                        f"upstream on our migrated schema (pool): {migrated.median:.3f}"
                        + _other_setup(stats, (op, size), setup),
                        SETUP_LABELS[setup],
                    )
                )
    if results.storage is not None:
        mine_s, theirs_s = results.storage["ours"], results.storage["upstream"]
        turns = results.settings.get("turns", "?")
        out.append(
            Row(
                f"storage per step, {turns}-turn chat",
                "bytes/step",
                f"{mine_s.per_step:,.0f}",
                f"{theirs_s.per_step:,.0f}",
                _ratio(mine_s.per_step, theirs_s.per_step),
                f"{mine_s.steps} steps; the three tables grew from empty by "
                f"{mine_s.total_bytes / 2**20:.2f} MiB (ours), "
                f"{theirs_s.total_bytes / 2**20:.2f} MiB (upstream)",
            )
        )
        delta_mine = results.storage.get("ours_delta")
        delta_theirs = results.storage.get("upstream_delta")
        if delta_mine is not None and delta_theirs is not None:
            out.append(
                Row(
                    "storage per step, same chat, messages in a DeltaChannel (beta)",
                    "bytes/step",
                    f"{delta_mine.per_step:,.0f}",
                    f"{delta_theirs.per_step:,.0f}",
                    _ratio(delta_mine.per_step, delta_theirs.per_step),
                    "the recommended setting: a graph-side change both savers support; "
                    f"ours here is {_ratio(delta_mine.per_step, theirs_s.per_step)} of "
                    "upstream with add_messages",
                )
            )
        pglz = results.storage.get("ours_pglz")
        if pglz is not None:
            out.append(
                Row(
                    "storage per step, same chat, ours with pglz TOAST compression",
                    "bytes/step",
                    f"{pglz.per_step:,.0f}",
                    f"{theirs_s.per_step:,.0f}",
                    _ratio(pglz.per_step, theirs_s.per_step),
                    "ours with the value columns set back to Postgres' default pglz (setup() "
                    "makes them lz4: faster puts, bigger message lists)",
                )
            )
    if results.effects is not None:
        fx = results.effects
        out.append(
            Row(
                "@effect call (claim + complete) vs two INSERT+commit",
                "ms/call",
                _ms(fx["effect"]),
                _ms(fx["two_commits"]),
                _ratio(fx["effect"].median, fx["two_commits"].median),
                "baseline: two single-row INSERT+commit on the same pool"
                + (
                    f"; the journal's two statements alone: {fx['statements'].median:.3f} "
                    f"({_ratio(fx['statements'].median, fx['two_commits'].median)})"
                    if "statements" in fx
                    else ""
                ),
            )
        )
        out.append(
            Row(
                "raw floor: one single-row INSERT+commit",
                "ms",
                _ms(fx["one_commit"]),
                "-",
                "-",
                "synchronous commit, same pool and server",
            )
        )
    out += _process_rows(results.processes, results.settings, pool_size)
    out += _process_rows(results.processes_async, results.settings, pool_size, mode="async")
    out += _runs_rows(results.runs)
    return out


def _statement_floor(steps: dict[tuple[str, str], Stats], mode: str, baseline: float) -> str:
    """The note naming the statement-only floor of a per-step row, when it was measured."""
    floor = steps.get(("statement_only", mode))
    if floor is None:
        return ""
    return (
        f"; our statement alone (the floor): {floor.median:.3f} ({_ratio(floor.median, baseline)})"
    )


def _best_setup(rates: dict[tuple[str, int], Stats], level: int) -> str:
    return best_upstream(rates, level, higher_is_better=True)[1]


def _rate_row(scenario: str, rates: dict[tuple[str, int], Stats], level: int, notes: str) -> Row:
    """A steps/s row: ours against upstream's faster setup at `level`, the other in the notes."""
    theirs, setup = best_upstream(rates, level, higher_is_better=True)
    other = "upstream_pool" if setup == "upstream_single" else "upstream_single"
    if (other, level) in rates:
        notes += f"; upstream on its {SETUP_LABELS[other]}: {rates[(other, level)].median:,.0f}"
    if ("noop", level) in rates:
        ceiling = rates[("noop", level)].median
        notes += (
            f"; no-op checkpointer (the ceiling) {ceiling:,.0f} = {_ratio(ceiling, theirs.median)}"
        )
    mine = rates[("ours", level)].median
    return Row(
        scenario,
        "steps/s",
        f"{mine:,.0f}",
        f"{theirs.median:,.0f}",
        _ratio(mine, theirs.median),
        notes,
        SETUP_LABELS[setup],
    )


def process_shape(settings: dict[str, Any], mode: str) -> str:
    """What each worker process of the `processes` (threads) or `processes_async` rows ran."""
    if mode == "async":
        return f"{settings.get('process_async_runs', 64)} async runs on one event loop"
    return f"{settings.get('process_threads', 16)} threads"


def _process_rows(
    found: dict[tuple[str, int], ProcessesResult] | None,
    settings: dict[str, Any],
    pool_size: int,
    *,
    mode: str = "threads",
) -> list[Row]:
    if found is None:
        return []
    out: list[Row] = []
    rates = {key: r.rate() for key, r in found.items()}
    shape = process_shape(settings, mode)
    each = f", {shape} each" if mode == "async" else ""
    for level in sorted({lv for _, lv in found}):
        mine, base = found[("ours", level)], found[(_best_setup(rates, level), level)]
        notes = (
            f"{shape} per process, pools of {pool_size}, "
            f"durability=sync; range ours "
            f"{_spread(mine.steps_per_s, 0)}, upstream {_spread(base.steps_per_s, 0)}; "
            f"server CPU share ours {statistics.median(mine.server_share):.0%}, upstream "
            f"{statistics.median(base.server_share):.0%}"
        )
        out.append(
            _rate_row(
                f"{level} worker process{'es' if level > 1 else ''} on one Postgres{each}, total",
                rates,
                level,
                notes,
            )
        )
    return out


def gc_label(settings: dict[str, Any]) -> str:
    """The `async_gc` scenario's collector setting, as rows name it."""
    thresholds = settings.get("async_gc_thresholds")
    if not thresholds:
        return "GC thresholds not recorded"
    return "GC thresholds " + "/".join(f"{int(t):,}" for t in thresholds)


def _async_rows(
    found: dict[tuple[str, int], AsyncResult] | None,
    pool_size: int,
    label: str = "",
    *,
    p99: bool = True,
) -> list[Row]:
    """Steps/s (and p99) rows per level; `label` names a setting the rows were measured
    under (the `async_gc` scenario)."""
    if found is None:
        return []
    out: list[Row] = []
    rates = {key: r.rate() for key, r in found.items()}
    p99s = {key: Stats.of([r.p99()]) for key, r in found.items()}
    for level in sorted({lv for _, lv in found}):
        mine, base = found[("ours", level)], found[(_best_setup(rates, level), level)]
        notes = (
            f"durability=sync, {pool_size} connections; range ours {_spread(mine.steps_per_s, 0)}, "
            f"upstream {_spread(base.steps_per_s, 0)}; CPU of the process per "
            f"step ours {statistics.median(mine.cpu_ms_per_step):.2f} ms, upstream "
            f"{statistics.median(base.cpu_ms_per_step):.2f}"
        )
        if ("noop", level) in found:
            notes += _cpu_split(mine, found[("noop", level)])
        out.append(
            _rate_row(
                f"async, {level} concurrent runs on one event loop{label}", rates, level, notes
            )
        )
        if not p99:
            continue
        best_p99, p99_setup = best_upstream(p99s, level)
        out.append(
            Row(
                f"async, {level} concurrent runs: p99 step latency",
                "ms",
                _spread(mine.p99_ms, 1),
                _spread(found[(p99_setup, level)].p99_ms, 1),
                _ratio(mine.p99(), best_p99.median),
                "median (range) over rounds of each round's 99th percentile, over every step "
                "of the runs that started before the window closed",
                SETUP_LABELS[p99_setup],
            )
        )
    return out


def _cpu_split(ours: AsyncResult, noop: AsyncResult) -> str:
    """How much of ours' CPU per step LangGraph's own work (the no-op saver's) explains,
    and how busy ours keeps its process: where a fall from one level to the next comes
    from. "Over the no-op saver" holds the saver's work and the loop's work for runs that
    wait on the database (the no-op saver's never wait); it is taken round by round (each
    round measures both savers), so drift between rounds cancels."""
    langgraph = statistics.median(noop.cpu_ms_per_step)
    return (
        f"; of ours' CPU per step, LangGraph's own (the no-op saver's) {langgraph:.2f} ms, "
        f"over the no-op saver {over_noop(ours, noop):.2f}; ours keeps "
        f"{cores_busy(ours):.2f} cores busy"
    )


def _large_rows(found: dict[tuple[str, str, int], Stats] | None) -> list[Row]:
    if found is None:
        return []
    out: list[Row] = []
    kinds = (
        (("write", "put"), ("read", "get_tuple")),
        (("chat_write", "put"), ("chat_read", "get_tuple")),
    )
    for ops in kinds:
        for size in sorted({size for _, op, size in found if op == ops[0][0]}):
            out += _large_pair(found, ops, size)
    return out


def _large_pair(
    found: dict[tuple[str, str, int], Stats], ops: tuple[tuple[str, str], ...], size: int
) -> list[Row]:
    out: list[Row] = []
    for op, label in ops:
        mine = found[("ours", op, size)]
        theirs, setup = best_upstream(found, op, size)
        what = f"large value, {_bytes(size)}" if op in DOCUMENT_OPS else f"chat of {size} messages"
        out.append(
            Row(
                f"{what}: {label}",
                "ms",
                _ms(mine),
                _ms(theirs),
                _ratio(mine.median, theirs.median),
                f"{mine.n} samples each" + _other_setup(found, (op, size), setup),
                SETUP_LABELS[setup],
            )
        )
    return out


DOCUMENT_OPS = ("write", "read")
"""The large scenario's ops for a document of N bytes, which the large-values target
covers; "chat_write" and "chat_read" are a chat of N messages, shown beside them."""


def _bytes(size: int) -> str:
    for unit, scale in (("MB", 1_000_000), ("KB", 1_000)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _other_setup(
    table: dict[Any, Stats], rest: Any, best: str, *, steps_per_invoke: int = 0
) -> str:
    """A note with the slower of upstream's setups, for the record."""
    other = "upstream_pool" if best == "upstream_single" else "upstream_single"
    key = (other, *rest) if isinstance(rest, tuple) else (other, rest)
    if key not in table:
        return ""
    value = table[key].median
    text = f"{value * steps_per_invoke:,.0f}" if steps_per_invoke else f"{value:.3f}"
    return f"; upstream on its {SETUP_LABELS[other]}: {text}"


def _spread(samples: list[float], digits: int = 2) -> str:
    """Median with the range of the samples: `median (min-max)`."""
    if len(samples) < 2:
        return f"{statistics.median(samples):.{digits}f}"
    return (
        f"{statistics.median(samples):.{digits}f} "
        f"({min(samples):.{digits}f}-{max(samples):.{digits}f})"
    )


def _p90(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _runs_rows(runs: RunsResults | None) -> list[Row]:
    """Recovery after SIGKILL per lease, and the registry's cost per run per worker count."""
    if runs is None:
        return [
            Row(
                "recovery after a SIGKILL (run registry)",
                "s",
                "n/a",
                "n/a",
                "n/a",
                "not measured in this run (scenario runs)",
            )
        ]
    out: list[Row] = []
    for lease_text, measures in runs.recovery.items():
        lease = float(lease_text)
        progress = measures["kill_to_progress"]
        expiry = measures["kill_to_expiry"]
        late = measures["expiry_to_claim"]
        out.append(
            Row(
                f"recovery after a SIGKILL, lease {lease:g} s: kill to the next checkpoint",
                "s",
                f"{statistics.median(progress):.2f} (p90 {_p90(progress):.2f}, "
                f"max {max(progress):.2f})",
                f"{lease:g} (lease)",
                f"{statistics.median(progress) / lease:.2f}x",
                f"{len(progress)} kill(s), goal lease + 1 s = {lease + 1:g}; kill to claim "
                f"{statistics.median(measures['kill_to_claim']):.2f}; the lease had "
                f"{_spread(expiry)} s left at the kill; claimed {_spread(late)} s after it "
                f"ran out; the next checkpoint re-runs a {runs.node_ms:g} ms node",
            )
        )
    levels = sorted({int(key.split("|")[1]) for key in runs.cost})
    for level in levels:
        mine, theirs = runs.cost.get(f"registry|{level}"), runs.cost.get(f"direct|{level}")
        if mine is None or theirs is None:
            continue
        plural = "es" if level > 1 else ""
        for measure, unit, label in (
            ("commits_per_run", "commits/run", "commits"),
            ("ms_per_run", "ms/run", "wall time"),
        ):
            extra = statistics.median(mine[measure]) - statistics.median(theirs[measure])
            notes = f"{extra:+.2f} {unit} for the registry; {len(mine[measure])} rounds of " + (
                f"{runs.runs_per_level} runs, median (range)"
            )
            if measure == "commits_per_run":
                notes += f"; creating a run {_spread(mine['create_commits'])}"
            else:
                notes += (
                    f"; creating a run {_spread(mine['create_ms'])} ms; one run takes "
                    f"{_spread(mine['run_ms'], 1)} ms in a worker, "
                    f"{_spread(theirs['run_ms'], 1)} invoked directly"
                )
            out.append(
                Row(
                    f"run registry {label} per run, {level} worker process{plural}",
                    unit,
                    _spread(mine[measure]),
                    _spread(theirs[measure]),
                    _ratio(statistics.median(mine[measure]), statistics.median(theirs[measure])),
                    notes,
                )
            )
    return out


def _get(fn: Callable[[], float]) -> float | None:
    """A target's ratio, or None when a number it needs was not measured in this run."""
    try:
        return fn()
    except (KeyError, ZeroDivisionError):
        return None


def _explain(fn: Callable[[], str]) -> str:
    """A reason, or "" when a number it needs was not measured in this run (a level or a
    saver missing from an older run's results). Only those errors: a bug in a reason shows."""
    try:
        return fn()
    except (KeyError, ZeroDivisionError, statistics.StatisticsError):
        return ""


def _measured(found: T | None, scenario: str) -> T:
    """A scenario's results; a scenario left out of this run raises KeyError, which
    `_get` and `_explain` read as "not measured"."""
    if found is None:
        raise KeyError(scenario)
    return found


CPU_BOUND = 0.9
"""Cores busy from which an async process counts as bound by its CPU (one event loop and
the GIL: at most about one core)."""


def over_noop(ours: AsyncResult, noop: AsyncResult) -> float:
    """Ours' CPU per step over the no-op saver's, in ms: the median of the rounds'
    differences when every round measured both (drift between rounds cancels), else the
    difference of the medians."""
    if len(ours.cpu_ms_per_step) == len(noop.cpu_ms_per_step):
        return statistics.median(
            a - b for a, b in zip(ours.cpu_ms_per_step, noop.cpu_ms_per_step, strict=True)
        )
    return statistics.median(ours.cpu_ms_per_step) - statistics.median(noop.cpu_ms_per_step)


def cores_busy(result: AsyncResult) -> float:
    """CPU seconds per second of the process, the median over rounds."""
    return statistics.median(
        rate * ms / 1000
        for rate, ms in zip(result.steps_per_s, result.cpu_ms_per_step, strict=True)
    )


def step_why(steps: dict[tuple[str, str], Stats], mode: str, goal: float) -> str:
    """Per-step time: how much of the goal a step that only sends our put statement leaves
    to the rest of the saver."""
    best, setup = best_upstream(steps, mode)
    mine = steps[("ours", mode)].median
    floor = steps[("statement_only", mode)].median
    allowed = goal * best.median
    text = (
        f"ours {mine:.3f} ms per step against {best.median:.3f} for upstream's "
        f"{SETUP_LABELS[setup]}; the goal is at most {allowed:.3f} ms. With a saver that "
        "only sends our put statement, its parameters computed once, a step takes "
        f"{floor:.3f} ms ({_ratio(floor, best.median)})"
    )
    if floor > allowed:
        text += ": no saver that sends this statement per step can meet the goal"
    else:
        text += (
            f", which leaves {allowed - floor:.3f} ms per step for the rest of the saver "
            "(building the row, serializing, parking the writes, the read at the start of "
            f"each run); that takes {mine - floor:.3f} ms"
        )
    return text + f". Profile: `python benchmarks/profile_step.py --durability {mode}`."


def floor_why(steps: dict[tuple[str, str], Stats], mode: str, goal: float) -> str:
    """Per-step time against the drop-in floor: what the goal leaves to the saver's Python
    around its one statement per step, and what ours takes."""
    mine = steps[("ours", mode)].median
    floor = steps[("statement_only", mode)].median
    return (
        f"ours {mine:.3f} ms per step against {floor:.3f} for a saver that only sends our "
        f"put statement, its parameters computed once; the goal is at most "
        f"{goal * floor:.3f} ms, which leaves {(goal - 1) * floor:.3f} ms per step for the "
        "rest of the saver (building the row, serializing, parking the writes, the read at "
        f"the start of each run, and LangGraph's `put_writes` calls, which that saver "
        f"ignores); ours takes {mine - floor:.3f}. Profile: `python "
        f"benchmarks/profile_step.py --durability {mode}` (the saver's own CPU per step and "
        "its parts)."
    )


def throughput_why(tput: dict[tuple[str, int], Stats], threads: int, goal: float) -> str:
    """Threads: the rate against the no-op checkpointer's ceiling (`tput` in invokes/s)."""
    best_invokes, setup = best_upstream(tput, threads, higher_is_better=True)
    best = best_invokes.median * STEPS_PER_INVOKE
    mine = tput[("ours", threads)].median * STEPS_PER_INVOKE
    ceiling = tput[("noop", threads)].median * STEPS_PER_INVOKE
    return (
        f"ours {mine:,.0f} steps/s against {best:,.0f} for upstream's "
        f"{SETUP_LABELS[setup]}; the goal needs {goal * best:,.0f}. LangGraph with "
        f"the no-op checkpointer reaches {ceiling:,.0f} at {threads} threads. Profile: "
        "`python benchmarks/profile_step.py` (the saver's CPU per step, which the threads "
        f"share under the GIL) and `python benchmarks/server_cpu.py --threads {threads}` "
        "(the server's)."
    )


def async_rate_why(found: dict[tuple[str, int], AsyncResult], level: int, goal: float) -> str:
    """Async runs on one loop: the CPU per step ours may spend at the cores it keeps busy."""
    rates = {key: r.rate() for key, r in found.items()}
    best, setup = best_upstream(rates, level, higher_is_better=True)
    mine, noop = found[("ours", level)], found[("noop", level)]
    cpu = statistics.median(mine.cpu_ms_per_step)
    cores = cores_busy(mine)
    needed = goal * best.median
    text = (
        f"ours {mine.rate().median:,.0f} steps/s against {best.median:,.0f} for upstream's "
        f"{SETUP_LABELS[setup]}; the goal needs {needed:,.0f}. Ours keeps {cores:.2f} cores "
        "busy"
    )
    if cores >= CPU_BOUND:
        allowed = cores * 1000 / needed
        langgraph = statistics.median(noop.cpu_ms_per_step)
        text += (
            f" (one event loop), so its rate follows its CPU per step: {cpu:.2f} ms, where "
            f"the goal allows {allowed:.2f}. LangGraph's own work (the no-op saver's) is "
            f"{langgraph:.2f} ms per step, which leaves {allowed - langgraph:.2f} ms for the "
            "saver and the loop's waits on the database; ours takes "
            f"{over_noop(mine, noop):.2f} over the no-op saver (the median of the rounds' "
            "differences)"
        )
    else:
        text += f": it waits part of the time, at {cpu:.2f} ms of CPU per step"
    return text + f". Profile: `python benchmarks/async_cpu_by_level.py --levels {level}`."


def gc_note(tuned: dict[tuple[str, int], AsyncResult] | None, setting: str) -> str:
    """What the same scenario measured under the README's collector setting (`async_gc`),
    for the reasons of the async targets measured under Python's default ("" when that
    scenario did not run, or lacks a number)."""
    if tuned is None:
        return ""
    levels = sorted(lv for name, lv in tuned if name == "ours")
    if not levels:
        return ""
    low, high = levels[0], levels[-1]
    rates = {key: r.rate() for key, r in tuned.items()}
    parts = []
    for level in levels:
        mine = rates[("ours", level)].median
        try:
            best, _ = best_upstream(rates, level, higher_is_better=True)
        except KeyError:  # upstream not measured at this level: the level is left out
            continue
        parts.append(f"{level} runs {mine:,.0f} steps/s ({_ratio(mine, best.median)})")
    text = f" Under {setting} (the README's setting for many runs on one loop; the `async_gc` rows)"
    if parts:
        text += f", ours made {', '.join(parts)} of upstream's best;"
    text += f" its rate at {high} runs is {async_flat(tuned, 'ours'):.2f}x its rate at {low}"
    if ("noop", low) in tuned and ("noop", high) in tuned:
        text += f", the no-op saver's {async_flat(tuned, 'noop'):.2f}x"
    return text + "."


def async_flat(found: dict[tuple[str, int], AsyncResult], name: str) -> float:
    """A saver's steps/s at the highest level of async runs over its rate at the lowest
    (KeyError when the run did not measure that saver)."""
    levels = sorted(lv for saver, lv in found if saver == name)
    if not levels:
        raise KeyError(name)
    return found[(name, levels[-1])].rate().median / found[(name, levels[0])].rate().median


def async_flat_why(found: dict[tuple[str, int], AsyncResult]) -> str:
    """Async flatness: ours against LangGraph's own (the no-op saver's), and where ours' CPU
    per step goes from the lowest level to the highest."""
    levels = sorted(lv for name, lv in found if name == "ours")
    if not levels:
        raise KeyError("ours")
    low, high = levels[0], levels[-1]

    def cpu(name: str, level: int) -> float:
        return statistics.median(found[(name, level)].cpu_ms_per_step)

    rise = over_noop(found[("ours", high)], found[("noop", high)]) - over_noop(
        found[("ours", low)], found[("noop", low)]
    )
    return (
        f"ours' rate at {high} runs is {async_flat(found, 'ours'):.2f}x its rate at {low}, "
        f"and LangGraph's own with the no-op saver, which stores nothing, "
        f"{async_flat(found, 'noop'):.2f}x on the same loop. Ours' CPU per step goes from "
        f"{cpu('ours', low):.2f} to {cpu('ours', high):.2f} ms, the no-op saver's from "
        f"{cpu('noop', low):.2f} to {cpu('noop', high):.2f}; ours over the no-op saver "
        f"(the median of the rounds' differences) changes by {rise:+.2f} ms. Profile: "
        f"`python benchmarks/async_cpu_by_level.py --levels {low},{high}`."
    )


def processes_why(
    found: dict[tuple[str, int], ProcessesResult], level: int, goal: float, mode: str = "threads"
) -> str:
    """Processes: the rates, the server's CPU share and the context switches of both."""
    rates = {key: r.rate() for key, r in found.items()}
    best, setup = best_upstream(rates, level, higher_is_better=True)
    mine, theirs = found[("ours", level)], found[(setup, level)]
    text = (
        f"ours {mine.rate().median:,.0f} steps/s against {best.median:,.0f} for upstream's "
        f"{SETUP_LABELS[setup]}; the goal needs {goal * best.median:,.0f}. The server used "
        f"{statistics.median(mine.server_share):.0%} of the machine's CPU with ours, "
        f"{statistics.median(theirs.server_share):.0%} with upstream's"
    )
    if mine.switches_per_step and theirs.switches_per_step:
        text += (
            f"; the machine switched context {statistics.median(mine.switches_per_step):.0f} "
            f"times per step with ours, {statistics.median(theirs.switches_per_step):.0f} "
            "with upstream's"
        )
    return text + (
        f"; the no-op checkpointer reaches {rates[('noop', level)].median:,.0f} in as many "
        f"processes. Profile: `python benchmarks/bench_processes.py --processes {level}"
        + (" --mode async" if mode == "async" else "")
        + "` (each saver's rate, server share and context switches"
        + ("" if mode == "async" else "; `--pools` adds ours on other pool sizes")
        + ") and `python benchmarks/"
        + (
            "async_cpu_by_level.py` (the async saver's CPU per step on one loop)."
            if mode == "async"
            else "profile_step.py` (the saver's CPU per step in one process)."
        )
    )


def large_why(large: dict[tuple[str, str, int], Stats]) -> str:
    """Large values: the worst operation and size, and what it costs over upstream."""
    worst = max(
        (large[("ours", op, size)].median / best_upstream(large, op, size)[0].median, op, size)
        for _, op, size in large
        if op in DOCUMENT_OPS
    )
    _, op, size = worst
    mine = large[("ours", op, size)].median
    theirs, setup = best_upstream(large, op, size)
    call = "put" if op == "write" else "get_tuple"
    return (
        f"the worst is the {_bytes(size)} {call}: ours {mine:.3f} ms against "
        f"{theirs.median:.3f} for upstream's {SETUP_LABELS[setup]}, "
        f"{(mine - theirs.median) * 1000:.0f} us more per call. Profile: `python "
        f"benchmarks/bench_large.py --sizes {size:g} --profile` (each call's wall time, "
        "client CPU and server CPU, per saver)."
    )


def effect_why(fx: dict[str, Stats], goal: float) -> str:
    """@effect: how much of the goal the journal's two statements alone leave to Python."""
    call, floor = fx["effect"].median, fx["two_commits"].median
    statements = fx["statements"].median
    allowed = goal * floor
    text = (
        f"an @effect call takes {call:.3f} ms against {floor:.3f} for two single-row commits; "
        f"the goal is at most {allowed:.3f}. The journal's two statements alone, parameters "
        f"computed once, take {statements:.3f} ms ({_ratio(statements, floor)})"
    )
    if statements > allowed:
        text += ": no Python around them can meet the goal"
    else:
        text += (
            f", which leaves {allowed - statements:.3f} ms for the Python around them (the "
            "key, the input hash, the runner, the journal's own Python); that takes "
            f"{call - statements:.3f} ms"
        )
    return text + ". Profile: `python benchmarks/profile_effect.py`."


def targets(results: Results) -> list[Target]:
    """The targets of issue 16 (and those of issue 6 that still hold), each a ratio measured
    in this run against the faster of upstream's two setups."""
    steps, tput, fx = results.steps, results.throughput, results.effects
    processes, processes_async = results.processes, results.processes_async
    most = max((level for _, level in processes), default=4) if processes else 4
    most_async = max((lv for _, lv in processes_async), default=4) if processes_async else 4
    async_shape = process_shape(results.settings, "async")
    found_async, found_gc, large = results.async_runs, results.async_gc, results.large
    setting = gc_label(results.settings)
    recovery = results.runs.recovery if results.runs is not None else None
    reads = results.reads.stats if results.reads is not None else None
    storage = results.storage
    sizes = sorted({size for _, _, size in reads} if reads else results.settings["read_sizes"])
    big, small = (sizes[-1], sizes[0]) if sizes else (0, 0)
    top = max((level for _, level in tput), default=16) if tput else 16

    def step_ratio(saver: str, mode: str = "sync") -> float:
        if steps is None:
            raise KeyError("steps")
        best, _ = best_upstream(steps, mode)
        return steps[(saver, mode)].median / best.median

    def step_ratio_to_floor(mode: str) -> float:
        found = _measured(steps, "steps")
        return found[("ours", mode)].median / found[("statement_only", mode)].median

    def tput_ratio(saver: str) -> float:
        if tput is None:
            raise KeyError("throughput")
        best, _ = best_upstream(tput, top, higher_is_better=True)
        return tput[(saver, top)].median / best.median

    def processes_ratio(saver: str = "ours", *, mode: str = "threads") -> float:
        scenario = "processes_async" if mode == "async" else "processes"
        found = _measured(processes_async if mode == "async" else processes, scenario)
        level = most_async if mode == "async" else most
        rates = {key: r.rate() for key, r in found.items()}
        best, _ = best_upstream(rates, level, higher_is_better=True)
        return rates[(saver, level)].median / best.median

    def async_ratio(level: int, saver: str = "ours", *, tuned: bool = False) -> float:
        found = _measured(found_gc if tuned else found_async, "async")
        rates = {key: r.rate() for key, r in found.items()}
        best, _ = best_upstream(rates, level, higher_is_better=True)
        return rates[(saver, level)].median / best.median

    def large_worst() -> float:
        if large is None:
            raise KeyError("large")
        return max(
            large[("ours", op, size)].median / best_upstream(large, op, size)[0].median
            for _, op, size in large
            if op in DOCUMENT_OPS
        )

    async_levels = sorted({lv for _, lv in found_async}) if found_async else [16, 64, 256]
    mid = 64 if 64 in async_levels else async_levels[len(async_levels) // 2]

    def read(saver: str, size: int) -> float:
        if reads is None:
            raise KeyError("reads")
        if saver == "upstream":
            return best_upstream(reads, "latest", size)[0].median
        return reads[(saver, "latest", size)].median

    return [
        Target(
            "sync per-step time vs upstream's best",
            _get(lambda: step_ratio("ours")),
            0.8,
            at_most=True,
            bound=_get(lambda: step_ratio("statement_only")),
            why=_explain(lambda: step_why(_measured(steps, "steps"), "sync", 0.8)),
        ),
        Target(
            "async per-step time vs upstream's best",
            _get(lambda: step_ratio("ours", "async")),
            0.8,
            at_most=True,
            bound=_get(lambda: step_ratio("statement_only", "async")),
            why=_explain(lambda: step_why(_measured(steps, "steps"), "async", 0.8)),
        ),
        *(
            Target(
                f"{mode} per-step time vs the drop-in floor (our put statement alone)",
                _get(lambda mode=mode: step_ratio_to_floor(mode)),
                1.05,
                at_most=True,
                why=_explain(lambda mode=mode: floor_why(_measured(steps, "steps"), mode, 1.05)),
            )
            for mode in ("sync", "async")
        ),
        Target(
            "exit per-step time vs upstream's best",
            _get(lambda: step_ratio("ours", "exit")),
            1.0,
            at_most=True,
            bound=_get(lambda: step_ratio("statement_only", "exit")),
            why=_explain(lambda: step_why(_measured(steps, "steps"), "exit", 1.0)),
        ),
        Target(
            f"throughput with {top} threads vs upstream's best",
            _get(lambda: tput_ratio("ours")),
            1.3,
            at_most=False,
            bound=_get(lambda: tput_ratio("noop")),
            why=_explain(lambda: throughput_why(_measured(tput, "throughput"), top, 1.3)),
        ),
        Target(
            f"async, {mid} concurrent runs on one loop: steps/s vs upstream's best",
            _get(lambda: async_ratio(mid)),
            2.0,
            at_most=False,
            bound=_get(lambda: async_ratio(mid, "noop")),
            why=_explain(
                lambda: (
                    async_rate_why(_measured(found_async, "async"), mid, 2.0)
                    + gc_note(found_gc, setting)
                )
            ),
        ),
        Target(
            f"async: ours at {async_levels[-1]} concurrent runs vs ours at {async_levels[0]}",
            _get(lambda: async_flat(_measured(found_async, "async"), "ours")),
            1.0,
            at_most=False,
            why=_explain(
                lambda: async_flat_why(_measured(found_async, "async")) + gc_note(found_gc, setting)
            ),
        ),
        Target(
            f"async, {mid} concurrent runs on one loop, recommended GC setting: steps/s vs "
            "upstream's best",
            _get(lambda: async_ratio(mid, tuned=True)),
            2.0,
            at_most=False,
            bound=_get(lambda: async_ratio(mid, "noop", tuned=True)),
            why=_explain(lambda: async_rate_why(_measured(found_gc, "async_gc"), mid, 2.0)),
        ),
        Target(
            f"async, recommended GC setting: ours at {async_levels[-1]} concurrent runs vs "
            f"ours at {async_levels[0]}",
            _get(lambda: async_flat(_measured(found_gc, "async_gc"), "ours")),
            1.0,
            at_most=False,
            why=_explain(lambda: async_flat_why(_measured(found_gc, "async_gc"))),
        ),
        Target(
            f"{most} worker process{'es' if most > 1 else ''} on one Postgres: total steps/s "
            "vs upstream's best",
            _get(processes_ratio),
            1.3,
            at_most=False,
            bound=_get(lambda: processes_ratio("noop")),
            why=_explain(lambda: processes_why(_measured(processes, "processes"), most, 1.3)),
        ),
        Target(
            f"{most_async} worker process{'es' if most_async > 1 else ''} on one Postgres, "
            f"{async_shape} each: total steps/s vs upstream's best",
            _get(lambda: processes_ratio(mode="async")),
            1.3,
            at_most=False,
            bound=_get(lambda: processes_ratio("noop", mode="async")),
            why=_explain(
                lambda: processes_why(
                    _measured(processes_async, "processes_async"), most_async, 1.3, "async"
                )
            ),
        ),
        Target(
            "large values: worst of put and get_tuple at every size vs upstream's best",
            _get(large_worst),
            1.0,
            at_most=True,
            why=_explain(lambda: large_why(_measured(large, "large"))),
        ),
        Target(
            f"latest fetch on the {big:,}-checkpoint thread vs upstream",
            _get(lambda: read("ours", big) / read("upstream", big)),
            0.5,
            at_most=True,
        ),
        Target(
            f"latest fetch flat: ours on {big:,} vs on {small:,} checkpoints",
            _get(lambda: read("ours", big) / read("ours", small)),
            1.5,
            at_most=True,
        ),
        Target(
            "storage per step vs upstream, recommended setting (messages in a DeltaChannel)",
            _get(
                lambda: (
                    _measured(storage, "storage")["ours_delta"].per_step
                    / _measured(storage, "storage")["upstream"].per_step
                )
            ),
            0.3,
            at_most=True,
        ),
        Target(
            "@effect overhead vs the two-commit floor",
            _get(
                lambda: (
                    _measured(fx, "effects")["effect"].median
                    / _measured(fx, "effects")["two_commits"].median
                )
            ),
            1.3,
            at_most=True,
            bound=_get(
                lambda: (
                    _measured(fx, "effects")["statements"].median
                    / _measured(fx, "effects")["two_commits"].median
                )
            ),
            why=_explain(lambda: effect_why(_measured(fx, "effects"), 1.3)),
        ),
        Target(
            "recovery after a SIGKILL: worst kill to next checkpoint vs lease + 1 s",
            _get(lambda: _worst_recovery(recovery)),
            1.0,
            at_most=True,
        ),
    ]


def _worst_recovery(recovery: dict[str, dict[str, list[float]]] | None) -> float:
    """The slowest recovery of every lease measured, as a share of that lease + 1 s."""
    if not recovery:
        raise KeyError("recovery")
    return max(max(m["kill_to_progress"]) / (float(lease) + 1) for lease, m in recovery.items())


def _table(header: list[str], align: list[str], body: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|",
        *("| " + " | ".join(cells) + " |" for cells in body),
    ]


def markdown(results: Results) -> str:
    """Machine, results table and targets, as markdown."""
    lines = ["Machine:", ""]
    lines += [f"- {key}: {value}" for key, value in results.machine.items()]
    lines += [
        "",
        "Medians (p95 in brackets) of interleaved samples; ratios are ours / baseline, where "
        "the baseline is upstream's `PostgresSaver` in the faster of its two setups measured "
        "in the same run, per row: one connection (`PostgresSaver.from_conn_string`, as its "
        "README shows) or a `ConnectionPool` (both autocommit, prepare_threshold=0, "
        "dict_row); the column 'upstream setup' names the one that won, the notes give the "
        "other. Rows whose baseline is not upstream say so. Lower is better, except for "
        "throughput.",
        "",
    ]
    lines += _table(
        ["scenario", "unit", "ours", "baseline", "upstream setup", "ours / baseline", "notes"],
        ["l", "l", "r", "r", "l", "r", "l"],
        [
            [r.scenario, r.unit, r.ours, r.baseline, r.setup, r.ratio, r.notes]
            for r in rows(results)
        ],
    )
    lines += ["", "Targets:", ""]
    lines += _table(
        ["target", "measured", "goal", "result", "gap", "best a drop-in saver could do here"],
        ["l", "r", "r", "l", "l", "r"],
        [
            [
                t.name,
                "-" if t.measured is None else f"{t.measured:.2f}x",
                f"{'<=' if t.at_most else '>='} {t.goal:g}x",
                {True: "PASS", False: "FAIL", None: "n/a"}[t.passed],
                t.gap(),
                "-" if t.bound is None else f"{t.bound:.2f}x",
            ]
            for t in targets(results)
        ],
    )
    missed = [t for t in targets(results) if t.passed is False and t.why]
    if missed:
        lines += ["", "Why each failing target misses, from this run's numbers:", ""]
        lines += [f"- {t.name}: {t.why}" for t in missed]
    settings = ", ".join(f"{k}={v}" for k, v in results.settings.items())
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in results.seconds.items())
    lines += ["", f"Settings: {settings}.", "", f"Time taken: {timing}."]
    return "\n".join(lines)


def plot(results: Results, path: Path) -> bool:
    """Draws the main comparisons into a PNG; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    colors = {"ours": "#2a7ab0", "upstream": "#c0504d", "floor": "#7f7f7f"}
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    (a_steps, a_tput, a_latest), (a_list, a_store, a_fx) = axes

    def bars(
        ax: Any,
        labels: list[str],
        series: dict[str, list[float]],
        title: str,
        fmt: str = "{:.3g}",
    ) -> None:
        width = 0.8 / max(1, len(series))
        for i, (name, values) in enumerate(series.items()):
            xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
            drawn = ax.bar(xs, values, width, label=name, color=colors.get(name.split()[0]))
            ax.bar_label(drawn, fmt=fmt, fontsize=8)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_title(title)
        ax.legend(fontsize=8)

    if results.steps is not None:
        s = results.steps
        bars(
            a_steps,
            list(MODES),
            {
                "ours": [s[("ours", m)].median for m in MODES],
                "upstream (best setup)": [best_upstream(s, m)[0].median for m in MODES],
            },
            "ms per step (10-node graph)",
        )
        a_steps.axhline(s[("none", "-")].median, color="k", ls=":", lw=1, label="graph alone")
        a_steps.axhline(
            s[("noop", "sync")].median, color="k", ls="--", lw=1, label="no-op saver (sync)"
        )
        if ("one_commit", "sync") in s:
            a_steps.axhline(
                s[("one_commit", "sync")].median,
                color=colors["floor"],
                ls="-.",
                lw=1,
                label="one commit per step (sync)",
            )
        if ("statement_only", "sync") in s:
            a_steps.axhline(
                s[("statement_only", "sync")].median,
                color=colors["ours"],
                ls=":",
                lw=1,
                label="our statement alone (sync)",
            )
        a_steps.legend(fontsize=7, loc="center right")
    if results.throughput is not None:
        t = results.throughput
        levels = sorted({level for _, level in t})
        for name in ("ours", "upstream_single", "upstream_pool"):
            if all((name, lv) in t for lv in levels):
                a_tput.plot(
                    levels, [t[(name, lv)].median * 10 for lv in levels],
                    "o-" if name == "ours" else "o--", label=name.replace("_", ", "),
                    color=colors[name.split("_")[0]], alpha=0.6 if name == "upstream_pool" else 1,
                )  # fmt: skip
        if all(("noop", lv) in t for lv in levels):
            a_tput.plot(
                levels, [t[("noop", lv)].median * 10 for lv in levels], "x--",
                label="no-op saver (ceiling)", color=colors["floor"],
            )  # fmt: skip
        a_tput.set_xscale("log", base=2)
        a_tput.set_xticks(levels, [str(lv) for lv in levels])
        a_tput.set_ylim(bottom=0)
        a_tput.set_xlabel("concurrent threads")
        a_tput.set_title("steps/s, durability=sync (higher is better)")
        a_tput.legend(fontsize=8)
    if results.reads is not None:
        r = results.reads.stats
        sizes = sorted({size for _, _, size in r})
        for ax, op, title in (
            (a_latest, "latest", "latest get_tuple, ms"),
            (a_list, "list10", "list(limit=10), ms"),
        ):
            for name, style in (("ours", "o-"), ("upstream", "o-"), ("upstream_migrated", "x--")):
                ax.plot(
                    sizes,
                    [
                        best_upstream(r, op, size)[0].median
                        if name == "upstream"
                        else r[(name, op, size)].median
                        for size in sizes
                    ],
                    style,
                    label=name.replace("_migrated", " on our schema"),
                    color=colors[name.split("_")[0]],
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.set_xlabel("checkpoints in the thread")
            ax.set_title(title)
            ax.legend(fontsize=8)
    if results.storage is not None:
        st = results.storage
        bars(
            a_store,
            ["add_messages", "DeltaChannel (beta)"][: 2 if "ours_delta" in st else 1],
            {
                "ours": [st[k].per_step for k in ("ours", "ours_delta") if k in st],
                "upstream": [st[k].per_step for k in ("upstream", "upstream_delta") if k in st],
            },
            f"storage, {results.settings.get('turns', '?')}-turn chat",
            fmt="{:,.0f}",
        )
    if results.effects is not None:
        fx = results.effects
        drawn = a_fx.bar(
            ["@effect call", "2 INSERT+commit", "1 INSERT+commit"],
            [fx["effect"].median, fx["two_commits"].median, fx["one_commit"].median],
            color=[colors["ours"], colors["floor"], colors["floor"]],
        )
        a_fx.bar_label(drawn, fmt="%.3f", fontsize=8)
        a_fx.set_title("ms per call: @effect vs the commit floor")
    fig.suptitle(f"langgraph-durable vs langgraph-checkpoint-postgres ({results.machine['cpu']})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
