"""The parameters a `put` builds (`checkpoint_row`, `blob_params`,
`parked_write_params`), for tests of the statements that store them."""

from __future__ import annotations

from typing import Any


def put_params(blob_count: int, write_count: int, **flags: Any) -> dict[str, Any]:
    """The parameters `put` builds (checkpoint_row, blob_params, parked_write_params)."""
    return {
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "c",
        "parent_checkpoint_id": None,
        "checkpoint": "{}",
        "metadata": "{}",
        "fence_token": None,
        "run_id": None,
        "step": 1,
        "synchronous_commit": "on",
        "channels": [f"c{i}" for i in range(blob_count)],
        "versions": [f"v{i}" for i in range(blob_count)],
        "types": [f"t{i}" for i in range(blob_count)],
        "blobs": [f"b{i}".encode() for i in range(blob_count)],
        "w_checkpoint_ids": ["k"] * write_count,
        "w_task_ids": [f"task{i}" for i in range(write_count)],
        "w_task_paths": ["p"] * write_count,
        "w_idxs": list(range(write_count)),
        "w_channels": [f"wc{i}" for i in range(write_count)],
        "w_types": ["wt"] * write_count,
        "w_blobs": [f"wb{i}".encode() for i in range(write_count)],
        "e_ids": [],
        "e_types": [],
        "e_keys": [],
        "e_payloads": [],
        "e_task_ids": [],
        **flags,
    }
