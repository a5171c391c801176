"""The static arena plan: where every intermediate tensor lives, from tensor liveness.

Tensors that share bytes form one *buffer*: a view (RESHAPE, SQUEEZE) and its input; the output
of an operator that runs in place (elementwise operators, table lookups, a depth-multiplier-1
depthwise convolution: csrc explains each) and the input it overwrites, when that input dies at
that operator. A buffer lives from the step that writes it first to the last step that reads it;
a step's scratch buffer (the depthwise plane) lives during that step only.

Buffers are placed greedily, largest first, each at the lowest offset where it overlaps no placed
buffer that is live at the same time (the strategy of TFLite Micro's GreedyMemoryPlanner; in
place execution is what makes the plan smaller than TFLite Micro's). Graph inputs stay in the
caller's input buffers (read only) and graph outputs are written straight into the caller's
output buffers; constants are ``static const`` arrays (flash). Nothing else is persistent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALIGN = 4  # bytes: every buffer starts on a 32-bit boundary (word loads stay possible on Cortex-M)


@dataclass
class Buffer:
    """Bytes some tensors share. ``kind``: "arena", "input" (the caller's input i, read only),
    "output" (the caller's output i)."""

    size: int
    first: int  # the step writing it (-1: before the first step)
    last: int  # the last step reading it
    kind: str = "arena"
    index: int = 0  # which caller input or output
    offset: int = -1  # in the arena
    tensors: list[str] = field(default_factory=list)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def place(buffers: list[Buffer]) -> int:
    """Give every arena buffer an offset (greedy by size, first fit in time); the arena's size."""
    placed: list[Buffer] = []
    for b in sorted((b for b in buffers if b.kind == "arena"), key=lambda b: (-b.size, b.first)):
        busy = sorted((p.offset, p.offset + _align(p.size)) for p in placed
                      if not (p.last < b.first or b.last < p.first))
        offset = 0
        for start, end in busy:
            if offset + b.size <= start:
                break
            offset = max(offset, end)
        b.offset = offset
        placed.append(b)
    return max((b.offset + _align(b.size) for b in placed), default=0)


def lower_bound(buffers: list[Buffer], steps: int) -> int:
    """The largest total size of arena buffers live at one step: no plan of these buffers is smaller."""
    return max((sum(_align(b.size) for b in buffers if b.kind == "arena" and b.first <= s <= b.last)
                for s in range(steps)), default=0)
