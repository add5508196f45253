"""What operators read: thread histories and diffs, thread lists, and `doctor`.

The CLI and the web console are thin layers over these functions; each reads only the
database (no graph is needed to show a thread).
"""

from langgraph_durable.ops._adoctor import adoctor
from langgraph_durable.ops._athreads import alist_threads, athread_diff, athread_history
from langgraph_durable.ops._checks import Finding
from langgraph_durable.ops._checks import summary as doctor_summary
from langgraph_durable.ops._doctor import doctor
from langgraph_durable.ops._history import (
    Step,
    ThreadHistory,
    ThreadSummary,
    plain,
    state_channels,
)
from langgraph_durable.ops._threads import list_threads, thread_diff, thread_history

__all__ = [
    "Finding",
    "Step",
    "ThreadHistory",
    "ThreadSummary",
    "adoctor",
    "alist_threads",
    "athread_diff",
    "athread_history",
    "doctor",
    "doctor_summary",
    "list_threads",
    "plain",
    "state_channels",
    "thread_diff",
    "thread_history",
]
