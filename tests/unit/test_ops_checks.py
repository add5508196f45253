"""`doctor`'s judgement of server settings and registry counts (no database needed)."""

from __future__ import annotations

from langgraph_durable.ops._checks import (
    judge_registry,
    judge_settings,
    judge_value_compression,
)
from langgraph_durable.ops._history import diff_values, plain, state_channels

HEALTHY = {
    "server_version": "15.20",
    "server_version_num": "150020",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "wal_level": "replica",
    "max_connections": "100",
    "superuser_reserved_connections": "3",
    "default_transaction_isolation": "read committed",
}


def levels(settings: dict[str, str], connections: int = 5) -> dict[str, str]:
    return {f.check: f.level for f in judge_settings(settings, connections)}


def test_a_healthy_server_is_all_ok() -> None:
    assert set(levels(HEALTHY).values()) == {"ok"}


def test_settings_that_lose_committed_steps_are_named() -> None:
    found = levels({**HEALTHY, "fsync": "off", "synchronous_commit": "off"})
    assert (found["fsync"], found["synchronous_commit"]) == ("fail", "fail")
    assert levels({**HEALTHY, "wal_level": "minimal"})["wal_level"] == "warn"
    assert levels({**HEALTHY, "server_version_num": "120000"})["server version"] == "fail"
    assert levels(HEALTHY, connections=90)["connections"] == "warn"
    advice = {f.check: f.advice for f in judge_settings({**HEALTHY, "fsync": "off"}, 1)}
    assert "set fsync = on" in advice["fsync"]


def test_registry_counts_that_need_a_person_warn() -> None:
    counts = {"stuck_runs": 1, "blocked_runs": 0, "unknown_effects": 2, "live_workers": 3}
    found = {f.check: (f.level, f.seen) for f in judge_registry(counts)}
    assert found["stuck runs"] == ("warn", "1 stuck")
    assert found["blocked runs"][0] == "ok"
    assert found["unknown effects"] == ("warn", "2 with an unknown outcome")
    assert found["workers"] == ("ok", "3 live")
    lapsed = {f.check: f.seen for f in judge_registry({**counts, "lapsed_effects": 1})}
    assert lapsed["unknown effects"] == "2 with an unknown outcome (1 running with a lapsed lease)"


def test_a_nan_that_stayed_is_no_change() -> None:
    nan = float("nan")
    before = {"score": nan, "nested": {"xs": [1.0, nan]}, "moved": 1.0}
    after = {"score": nan, "nested": {"xs": [1.0, nan]}, "moved": nan}
    assert diff_values(before, after) == {
        "added": {},
        "removed": {},
        "changed": {"moved": {"from": 1.0, "to": after["moved"]}},
    }


def test_a_set_read_again_in_another_order_is_no_change() -> None:
    """Found by review: `plain` listed a set in its iteration order, which depends on how
    the set was built, so {1, 9} and {9, 1} read as a change."""
    before, after = {"tags": {1, 9}}, {"tags": set()}
    for n in (9, 1):  # built in another order: 1 and 9 share a slot, so they swap
        after["tags"].add(n)
    assert list(before["tags"]) != list(after["tags"])
    assert diff_values(before, after)["changed"] == {}
    assert diff_values({"tags": {"b", "a"}}, {"tags": {"a", "b", "c"}})["changed"] == {
        "tags": {"from": ["a", "b"], "to": ["a", "b", "c"]}
    }


def test_diffs_and_plain_values_leave_routing_channels_out() -> None:
    before = {"log": ["a"], "gone": 1, "branch:to:b": None, "__start__": {"x": 1}}
    after = {"log": ["a", "b"], "new": {"k": (1, 2)}, "branch:to:c": None}
    assert state_channels(after) == {"log": ["a", "b"], "new": {"k": (1, 2)}}
    assert diff_values(before, after) == {
        "added": {"new": {"k": [1, 2]}},
        "removed": {"gone": 1},
        "changed": {"log": {"from": ["a"], "to": ["a", "b"]}},
    }
    assert plain(b"xyz") == "<3 bytes>"
    assert plain(object.__new__(object)).startswith("<object object")


def test_value_compression_warns_only_where_lz4_could_be_used() -> None:
    assert judge_value_compression(True, []).level == "ok"
    assert judge_value_compression(False, ["checkpoints.checkpoint"]).level == "ok"
    found = judge_value_compression(True, ["checkpoint_blobs.blob", "checkpoints.checkpoint"])
    assert (found.level, found.seen) == (
        "warn",
        "not lz4: checkpoint_blobs.blob, checkpoints.checkpoint",
    )
    assert "ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION lz4" in found.advice
    assert "ALTER TABLE checkpoints ALTER COLUMN checkpoint SET COMPRESSION lz4" in found.advice
