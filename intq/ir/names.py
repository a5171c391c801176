"""Fresh names: the one rule every stage uses to name a tensor or node it adds.

``free_name(hint, taken...)`` is ``hint`` itself when no container of ``taken`` holds it, else the
first of ``hint_1``, ``hint_2``, ... that none holds. The caller records the name it takes (a graph's
tensors dict, a set of claimed names); this module keeps no state.
"""

from __future__ import annotations

from collections.abc import Container


def free_name(hint: str, *taken: Container[str]) -> str:
    """``hint``, or ``hint_1``, ``hint_2``... : the first name in none of the ``taken`` containers."""
    name, k = hint, 1
    while any(name in t for t in taken):
        name, k = f"{hint}_{k}", k + 1
    return name


def claim(hint: str, taken: set[str], *also: Container[str]) -> str:
    """:func:`free_name` of ``hint`` against ``taken`` and ``also``, added to ``taken``."""
    name = free_name(hint, taken, *also)
    taken.add(name)
    return name
