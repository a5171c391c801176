"""The plan's hot path through native code: a convolution and the table op after it in one call
(:func:`fuse_tables`), and each run of consecutive native steps as one C call (:func:`programs`,
``intq_run_program``), their outputs views of one fresh buffer per run.
"""

from __future__ import annotations

import ctypes

import numpy as np

from intq.runtime import native
from intq.runtime.native.bound import (Alias, Bound, BoundBinary, BoundChannelTables, BoundChecked, BoundCopies,
                                      BoundTable, BoundWithTable, TableAfter)
from intq.runtime.native.registry import INT8_DTYPE


def fuse_tables(runs: list, args: list[tuple[int, ...]], outs: list[tuple[int, ...]]) -> list:
    """The plan's runs with each native convolution whose output slot a native table step reads
    bound as a fused pair (:class:`BoundWithTable` + :class:`TableAfter`); other runs as given.
    The convolution's output is still produced (other readers, ``tensors()``)."""
    producer = {o[0]: i for i, o in enumerate(outs) if len(o) == 1 and isinstance(runs[i], Bound)}
    runs = list(runs)
    for j, table in enumerate(runs):
        if type(table) is not BoundTable or table.fn_obj is None or not args[j]:
            continue
        i = producer.get(args[j][0])
        conv = runs[i] if i is not None else None
        if type(conv) is not Bound or conv.fn_obj is None or int(np.prod(conv.out_shape)) != table.size:
            continue
        fused_fn = {"intq_conv": "intq_conv_lut_obj", "intq_depthwise": "intq_depthwise_lut_obj"}.get(conv.fn.__name__)
        if fused_fn is None:
            continue
        lib = native.library()
        if lib is None or getattr(lib.lib, conv.fn.__name__, None) is not conv.fn:
            continue  # a test's other build: its own entry points only
        fused = BoundWithTable(conv, getattr(lib.lib, fused_fn), table)
        runs[i], runs[j] = fused, TableAfter(fused)
    return runs


#: native.c's step kinds (intq_run_program), by entry point
_KIND = {"intq_conv": 0, "intq_depthwise": 1, "intq_mul": 4, "intq_add": 5, "intq_lut": 6, "intq_max_pool": 7,
         "intq_transpose": 8, "intq_pad": 9, "intq_mean": 10, "intq_lut_channels": 11,
         "intq_batch_matmul": 12, "intq_copy": 13, "intq_softmax": 14}
_FUSED_KIND = {0: 2, 1: 3}  # a convolution computing its table op's output too
_MAX_DYNAMIC = 4  # array objects intq_run_program takes
_ARENA_CAP = 8 << 20  # bytes of step outputs per program run (one buffer per run); a bigger step runs alone
_ALIGN = 64


class NotProgram(Exception):
    """A program's input is not what the plan verified (dtype, layout, size): the plan's hot path
    falls back to its step loop, which handles (or reports) it step by step."""


class Program:
    """Consecutive native steps of a plan as one C call (``intq_run_program``): their outputs are
    views of one fresh int8 buffer per run (so a run's tensors stay valid after the next run), the
    calls the steps' own, in their order, on the same bytes. ``__call__(*inputs)`` takes the
    program's inputs from outside it (checked: int8, C-contiguous, their sizes) and returns the
    outputs :attr:`outs` names: the step outputs read after the program (``visible``), then, when
    some are read only inside it, the run's buffer itself (slot :attr:`arena_slot`), from which
    :attr:`hidden` — ``(slot, start, end, shape)`` of each of those — makes their views on request
    (:meth:`intq.runtime.plan.ExecutionPlan.complete`): a view costs more than a small step."""

    def __init__(self, fn, steps: list, dynamic: list[int], constants: list[np.ndarray],
                 views: list[tuple[int, int, tuple[int, ...]]], total: int, outs: tuple[int, ...], keep: list,
                 visible: frozenset | None = None, arena_slot: int | None = None):
        self.fn = fn
        self.sizes = tuple(dynamic)
        self.step_array = (native.Step * len(steps))(*steps)
        self.ext = (ctypes.c_void_p * (len(dynamic) + len(constants)))(
            *([None] * len(dynamic)), *(c.ctypes.data for c in constants))
        self.struct = native.Program(len(steps), len(dynamic), ctypes.addressof(self.step_array),
                                     ctypes.addressof(self.ext))
        self.address = ctypes.addressof(self.struct)
        every = [(slot, a, a + n, shape) for slot, (a, n, shape) in zip(outs, views)]
        shown = [v for v in every if visible is None or arena_slot is None or v[0] in visible]
        self.hidden = tuple(v for v in every if v not in shown)
        self.arena_slot = arena_slot if self.hidden else None
        self.views = tuple((a, b, shape) for _, a, b, shape in shown)
        self.total = max(total, 1)
        self.outs = tuple(v[0] for v in shown) + ((self.arena_slot,) if self.arena_slot is not None else ())
        self.padding = (None,) * (_MAX_DYNAMIC - len(dynamic))
        self.keep = keep + constants  # the parameter structures, tables and constants the steps point to

    def __call__(self, *xs):
        for x, size in zip(xs, self.sizes):
            if type(x) is not np.ndarray or x.dtype is not INT8_DTYPE or not x.flags.c_contiguous or x.size != size:
                raise NotProgram
        arena = np.empty(self.total, INT8_DTYPE)
        if self.fn(self.address, arena, *xs, *self.padding):
            raise NotProgram  # a step refused its input (SOFTMAX): the step loop reports it
        out = [arena[a:b].reshape(shape) for a, b, shape in self.views]
        if self.arena_slot is not None:
            out.append(arena)
        return out


class _Builder:
    """One program under construction (:func:`programs`)."""

    def __init__(self):
        self.steps: list = []  # native.Step
        self.members: list[int] = []  # plan step indices taken
        self.dynamic: list[int] = []  # slots read from outside, in call order
        self.dynamic_sizes: list[int] = []
        self.constants: list[np.ndarray] = []
        self.constant_codes: dict[int, int] = {}
        self.offsets: dict[int, tuple[int, int]] = {}  # out slot -> (arena offset, size)
        self.views: list = []
        self.outs: list[int] = []
        self.total = 0
        self.keep: list = []
        self.fusable: dict[int, tuple[int, object]] = {}  # conv output slot -> (its Step index, BoundWithTable)


def _operand(b: _Builder, slot: int, size: int, constants: dict[int, object], trial: dict) -> int | None:
    """The operand code of ``slot`` (``size`` int8 values) in ``b``, or None when it cannot be one;
    new dynamic inputs and constants are recorded in ``trial`` (committed when the step is taken)."""
    if slot in b.offsets:
        return b.offsets[slot][0] if b.offsets[slot][1] == size else None
    if slot in constants:
        data = np.asarray(constants[slot])
        if data.dtype != np.int8 or data.size != size:
            return None
        if slot not in b.constant_codes and slot not in trial["const"]:
            trial["const"][slot] = np.ascontiguousarray(data)
        return ("const", slot)  # resolved at finish: constants follow the dynamic inputs
    if slot <= 0:
        return None
    if slot in b.dynamic:
        k = b.dynamic.index(slot)
        return -1 - k if b.dynamic_sizes[k] == size else None
    if slot in trial["dyn"]:
        k = trial["dyn"].index(slot)
        return -1 - (len(b.dynamic) + k) if trial["dyn_sizes"][k] == size else None
    trial["dyn"].append(slot)
    trial["dyn_sizes"].append(size)
    return -1 - (len(b.dynamic) + len(trial["dyn"]) - 1)


def _describe(run, lib) -> tuple | None:
    """``(kind, params address, n, data input sizes, output shape, bound)`` of a native step run a
    program can take (the process library's own entry points), or None."""
    conv = run.conv if type(run) is BoundWithTable else run
    if type(conv) is BoundChecked and conv.fn.__name__ == "intq_softmax":  # a refused row: the program returns nonzero
        if getattr(lib, "intq_softmax", None) is not conv.fn:
            return None
        return _KIND["intq_softmax"], conv.address, 0, (conv.in_size,), conv.out_shape, conv
    if type(conv) in (Bound, BoundBinary, BoundTable, BoundChannelTables):
        kind = _KIND.get(conv.fn.__name__)
        if kind is None or getattr(lib, conv.fn.__name__, None) is not conv.fn:
            return None
        if type(conv) is Bound:
            return kind, conv.address, 0, (conv.in_size,), conv.out_shape, conv
        if type(conv) is BoundBinary:
            return kind, conv.address, 0, conv.sizes, conv.out_shape, conv
        if type(conv) is BoundChannelTables:  # n: rows (the step's cols: channels, set by _take)
            return kind, conv.address, conv.rows, (conv.size,), conv.shape, conv
        return kind, conv.address, conv.size, (conv.size,), conv.shape, conv
    return None


def programs(flat: tuple, constants: dict[int, object], live=None, first_slot: int | None = None) -> tuple:
    """The plan's hot-path steps ``(run, args, outs)`` with each run of consecutive native steps
    as one :class:`Program` step (its args: the slots it reads from outside; its outs: every slot
    its steps write); other steps as given. ``constants``: slot -> data of the plan's constants.
    With ``first_slot``, a program's outs are only the slots read after it (by another step, or in
    ``live``: the graph's outputs) and its buffer, in a slot of its own numbered from
    ``first_slot`` on (:attr:`Program.hidden` holds the others). Unchanged without the process
    library or its array-object reading."""
    lib = native.library()
    if lib is None or not lib.objects or not hasattr(lib.lib, "intq_run_program"):
        return flat
    out: list = []
    b = _Builder()

    def close():
        nonlocal b
        if len(b.keep) >= 2:  # two native plan steps or more (a reshape's view adds none)
            codes = {slot: -1 - (len(b.dynamic) + k) for k, slot in enumerate(b.constant_codes)}
            for s in b.steps:  # the constants' codes, now that the dynamic inputs are known
                for field in ("in0", "in1"):
                    v = getattr(s, field)
                    if v <= -(1 << 40):
                        setattr(s, field, codes[-(v + (1 << 40))])
            consts = [b.constant_codes[slot] for slot in b.constant_codes]
            out.append(((lib.lib.intq_run_program, b.steps, b.dynamic_sizes, consts, b.views, b.total,
                         tuple(b.outs), b.keep), tuple(b.dynamic), tuple(b.outs)))
        else:
            out.extend(flat[i] for i in b.members)
        b = _Builder()

    for i, (run, args, outs) in enumerate(flat):
        step = _take(b, i, run, args, outs, constants, lib.lib)
        if step is None and b.members:
            close()
            step = _take(b, i, run, args, outs, constants, lib.lib)
        if step is None:
            out.append(flat[i])
    close()
    read = set(live or ()) | {a for _, args, _ in out for a in args}
    result = []
    for run, args, outs in out:
        if type(run) is tuple:  # a program's parts
            arena_slot = None if first_slot is None else first_slot + sum(type(r) is Program and r.arena_slot
                                                                          is not None for r, _, _ in result)
            run = Program(*run, visible=frozenset(read), arena_slot=arena_slot)
            outs = run.outs
        result.append((run, args, outs))
    return tuple(result)


def _take(b: _Builder, i: int, run, args, outs, constants, lib) -> bool | None:
    """Add plan step ``i`` to ``b`` if it fits (True), else None (``b`` unchanged)."""
    if type(run) is Alias:  # a reshape of a step output of this program: a second view of its bytes
        source = b.offsets.get(args[0]) if args else None
        if source is None or source[1] != run.size or len(outs) != 1 or outs[0] <= 0:
            return None
        b.offsets[outs[0]] = source
        b.views.append((source[0], source[1], run.shape))
        b.outs.append(outs[0])
        b.members.append(i)
        return True
    if type(run) is TableAfter:
        producer = run.producer
        fused = b.fusable.get(args[0]) if args else None
        if fused is not None and fused[1] is producer and len(outs) == 1:
            size = b.offsets[args[0]][1]
            if b.total + size > _ARENA_CAP:
                return None
            k = fused[0]
            s = b.steps[k]
            s.kind, s.table = _FUSED_KIND[s.kind], producer.table.address
            s.out1 = _arena(b, outs[0], size, producer.conv.out_shape)
            del b.fusable[args[0]]
            b.members.append(i)
            return True
        run = producer.table  # its own lookup on whatever array it reads
    if type(run) is BoundCopies:
        return _take_copies(b, i, run, args, outs, constants, lib)
    desc = _describe(run, lib)
    if desc is None or len(outs) != 1:
        return None
    kind, address, n, sizes, shape, bound = desc
    data = args[:len(sizes)]
    if len(data) != len(sizes):
        return None
    size = int(np.prod(shape, dtype=np.int64))
    if b.members and b.total + size > _ARENA_CAP:
        return None
    trial = {"dyn": [], "dyn_sizes": [], "const": {}}
    codes = []
    for slot, want in zip(data, sizes):
        code = _operand(b, slot, want, constants, trial)
        if code is None:
            return None
        codes.append(code)
    if len(b.dynamic) + len(trial["dyn"]) > _MAX_DYNAMIC:
        return None
    b.dynamic += trial["dyn"]
    b.dynamic_sizes += trial["dyn_sizes"]
    b.constant_codes.update(trial["const"])
    codes = [-(1 << 40) - c[1] if isinstance(c, tuple) else c for c in codes]  # constants: resolved in close()
    step = native.Step(kind=kind, params=address, table=None, n=n, in0=codes[0], in1=codes[1] if len(codes) > 1 else 0,
                       out0=0, out1=0)
    if type(bound) is BoundChannelTables:
        step.cols = bound.cols
    step.out0 = _arena(b, outs[0], size, shape)
    b.steps.append(step)
    b.keep.append(bound)
    b.members.append(i)
    if type(desc[5]) is Bound and kind in _FUSED_KIND and type(run) is BoundWithTable:
        b.fusable[outs[0]] = (len(b.steps) - 1, run)
    return True


def _take_copies(b: _Builder, i: int, run: BoundCopies, args, outs, constants, lib) -> bool | None:
    """Add plan step ``i``, a data-movement op as block copies (:class:`BoundCopies`), to ``b``: one
    program step per copy (an output nobody reads is not written); None if it does not fit."""
    if getattr(lib, "intq_copy", None) is not run.fn or len(outs) != len(run.out_shapes):
        return None
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in run.out_shapes]
    if b.members and b.total + sum(size for o, size in zip(outs, sizes) if o > 0) > _ARENA_CAP:
        return None
    trial = {"dyn": [], "dyn_sizes": [], "const": {}}
    codes = {}
    for k, size in run.in_sizes.items():
        if k >= len(args):
            return None
        code = _operand(b, args[k], size, constants, trial)
        if code is None:
            return None
        codes[k] = -(1 << 40) - code[1] if isinstance(code, tuple) else code
    if len(b.dynamic) + len(trial["dyn"]) > _MAX_DYNAMIC:
        return None
    b.dynamic += trial["dyn"]
    b.dynamic_sizes += trial["dyn_sizes"]
    b.constant_codes.update(trial["const"])
    regions = {o: _arena(b, outs[o], sizes[o], run.out_shapes[o]) for o in range(len(outs)) if outs[o] > 0}
    for k, o, _, address in run.parts:
        if o in regions:
            b.steps.append(native.Step(kind=_KIND["intq_copy"], params=address, table=None, n=0, in0=codes[k], in1=0,
                                       out0=regions[o], out1=0))
    b.keep.append(run)
    b.members.append(i)
    return True


def _arena(b: _Builder, slot: int, size: int, shape) -> int:
    """A fresh arena region of ``size`` bytes for output ``slot``: its offset."""
    offset = b.total
    b.total = offset + -(-max(size, 1) // _ALIGN) * _ALIGN
    b.offsets[slot] = (offset, size)
    b.views.append((offset, size, tuple(shape)))
    b.outs.append(slot)
    return offset
