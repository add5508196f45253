"""Which connection source each saver and journal uses, without reading private attributes.

A saver registers its source when it is made; the effect journal, the approvals queries
and the CLI look it up here (`source_of(saver)`), and the retry on a lost connection finds
the pool to check through it. Weak references: an entry goes when its owner goes.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["register_source", "source_of"]

_sources: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def register_source(owner: object, source: object) -> None:
    """Record that `owner` (a saver or a journal) talks to the database through `source`."""
    _sources[owner] = source


def source_of(owner: object) -> Any:
    """The connection source `owner` registered, or None."""
    try:
        return _sources.get(owner)
    except TypeError:  # not weak-referenceable: never registered
        return None
