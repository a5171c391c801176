"""The static arena plan: where every intermediate tensor lives, from tensor liveness.

Tensors that share bytes form one *buffer*: a view (RESHAPE, SQUEEZE) and its input; the output
of an operator that runs in place (elementwise operators, table lookups, a depth-multiplier-1
depthwise convolution: csrc explains each) and the input it overwrites, when that input dies at
that operator. A buffer lives from the step that writes it first to the last step that reads it;
a step's scratch buffer (the depthwise plane) lives during that step only.

A buffer may lie *inside* another (``parent``, at byte ``rel``): an output of SPLIT, SLICE or
STRIDED_SLICE that is one contiguous run of its input is that run (no copy), and a CONCATENATION
(or PAD) input whose bytes are one contiguous run of the output is written there by its producer
(concatenation into place, no copy). A buffer and everything inside it form a *family*, placed as
one: it is live from the first write of any member to the last read of any member, and its bytes
are free for an in-place output only when every member is dead.

Buffers are placed greedily, largest first, each at the lowest offset where it overlaps no placed
buffer that is live at the same time (the strategy of TFLite Micro's GreedyMemoryPlanner; in
place execution is what makes the plan smaller than TFLite Micro's). Graph inputs stay in the
caller's input buffers (read only) and graph outputs are written straight into the caller's
output buffers; constants are ``static const`` arrays (flash). Nothing else is persistent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALIGN = 4  # bytes: every buffer starts on a 32-bit boundary (word loads; int32 tensors)


@dataclass
class Buffer:
    """Bytes some tensors share. ``kind``: "arena", "input" (the caller's input i, read only),
    "output" (the caller's output i)."""

    size: int
    first: int  # the step writing it (-1: before the first step)
    last: int  # the last step reading it
    kind: str = "arena"
    index: int = 0  # which caller input or output
    offset: int = -1  # in the arena (roots only)
    tensors: list[str] = field(default_factory=list)
    parent: "Buffer | None" = None  # the buffer this one lies inside, at byte ``rel``
    rel: int = 0
    children: list["Buffer"] = field(default_factory=list)
    align: int = ALIGN  # 8 for a buffer holding int64 tensors

    def root(self) -> "Buffer":
        b = self
        while b.parent is not None:
            b = b.parent
        return b

    def family(self) -> list["Buffer"]:
        """This buffer and every buffer inside it."""
        out, todo = [], [self]
        while todo:
            b = todo.pop()
            out.append(b)
            todo += b.children
        return out

    def adopt(self, child: "Buffer", rel: int) -> None:
        """Place the root ``child`` (and its family) inside this buffer at byte ``rel``."""
        assert child.parent is None and 0 <= rel and rel + child.size <= self.size, (child, rel, self.size)
        child.parent, child.rel = self, rel
        self.children.append(child)

    def base(self) -> tuple["Buffer", int]:
        """The root and this buffer's byte offset inside it."""
        b, rel = self, 0
        while b.parent is not None:
            rel += b.rel
            b = b.parent
        return b, rel


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def roots(buffers: list[Buffer]) -> list[Buffer]:
    """The arena buffers that are not inside another, their lifetimes widened to their families'."""
    out = []
    for b in buffers:
        if b.kind == "arena" and b.parent is None:
            fam = b.family()
            b.first, b.last = min(x.first for x in fam), max(x.last for x in fam)
            out.append(b)
    return out


def place(buffers: list[Buffer]) -> int:
    """Give every arena root an offset (greedy by size, first fit in time); the arena's size."""
    placed: list[Buffer] = []
    for b in sorted(roots(buffers), key=lambda b: (-b.size, b.first)):
        busy = sorted((p.offset, p.offset + _align(p.size)) for p in placed
                      if not (p.last < b.first or b.last < p.first))
        align = max(x.align for x in b.family())
        offset = 0
        for start, end in busy:
            if offset + b.size <= start:
                break
            offset = max(offset, -(-end // align) * align)
        b.offset = offset
        placed.append(b)
    return max((b.offset + _align(b.size) for b in placed), default=0)


def lower_bound(buffers: list[Buffer], steps: int) -> int:
    """The largest total size of arena buffers live at one step: no plan of these buffers is smaller."""
    top = roots(buffers)
    return max((sum(_align(b.size) for b in top if b.first <= s <= b.last) for s in range(steps)), default=0)
