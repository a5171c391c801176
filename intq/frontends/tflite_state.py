"""Resource variables of a streaming ``.tflite`` model as explicit state inputs and outputs.

Streaming models (microWakeWord's keyword spotters, streaming convolutions in general) keep a
ring buffer per layer between invocations in resource variables: subgraph 0 starts with
``CALL_ONCE`` (which runs an init subgraph on the first invocation: ``VAR_HANDLE`` then
``ASSIGN_VARIABLE`` of a constant, per variable), takes a handle per variable (``VAR_HANDLE``,
named by ``shared_name``), reads it (``READ_VARIABLE``) and writes it (``ASSIGN_VARIABLE``). The
runtimes copy the bytes: a variable holds the last tensor assigned to it, whatever its parameters.

intq's graph has no mutable state, so :func:`state_plan` rewrites this dataflow, in operator order:

* the first ``READ_VARIABLE`` of a variable before any assignment: its output tensor becomes a
  graph input (the state coming in);
* a ``READ_VARIABLE`` after an assignment in the same invocation: its readers read the tensor
  assigned (what the runtimes' copy holds);
* the last tensor ``ASSIGN_VARIABLE`` gives each variable becomes a graph output (the state going
  out); the init subgraph's constants are the initial states.

``graph.metadata["state"]`` lists each variable (``variable``, ``input``, ``output``, ``initial``);
:class:`intq.runtime.streaming.StatefulInterpreter` carries the state from one run to the next as
TensorFlow Lite Micro and LiteRT do, starting from the initial values (what ``CALL_ONCE`` assigns
on the first invocation). Refused by name: an init subgraph that computes anything but constant
assignments, a variable read but never assigned, handles used by other operators.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from intq.errors import UnsupportedOperatorError
from intq.tflite.reader import TfliteFile, ints, operator_code_entry, read_tensor, text
from intq.tflite.schema import builtin_op_name, operator_code

STATE_OPS = frozenset({"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})


@dataclass
class StatePlan:
    """How subgraph 0's tensors change when its variables become inputs and outputs (indices)."""

    dropped: set[int] = field(default_factory=set)  # operator indices of the state ops
    rename: dict[int, int] = field(default_factory=dict)  # tensor read -> the tensor it stands for
    inputs: list[int] = field(default_factory=list)  # state inputs (READ_VARIABLE outputs)
    outputs: list[int] = field(default_factory=list)  # state outputs (tensors assigned last)
    variables: list[dict] = field(default_factory=list)  # name, input and output tensor index, initial
    resource_tensors: set[int] = field(default_factory=set)  # handles: no data, no graph tensor


def _op_name(f: TfliteFile, op, k: int) -> str:
    return builtin_op_name(operator_code(operator_code_entry(f, op, k))) or ""


def state_plan(f: TfliteFile) -> StatePlan | None:
    """The plan of the module docstring for ``f``, or None when subgraph 0 uses no variables."""
    sub = f.model.subgraphs[0]
    ops = list(sub.operators or [])
    names = [_op_name(f, op, k) for k, op in enumerate(ops)]
    if not STATE_OPS & set(names):
        return None
    where = f.where
    plan = StatePlan()
    handle_of: dict[int, str] = {}  # handle tensor -> variable
    init_index = None
    for k, (op, name) in enumerate(zip(ops, names)):
        if name == "CALL_ONCE":
            init_index = int(op.builtinOptions.initSubgraphIndex)
            plan.dropped.add(k)
        elif name == "VAR_HANDLE":
            handle_of[ints(op.outputs)[0]] = _variable(op)
            plan.dropped.add(k)
    plan.resource_tensors = set(handle_of)
    initial = _initial_values(f, init_index) if init_index is not None else {}
    current: dict[str, int] = {}  # variable -> tensor holding its value now
    first_read: dict[str, int] = {}
    assigned: dict[str, int] = {}
    for k, (op, name) in enumerate(zip(ops, names)):
        if name not in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
            used = set(ints(op.inputs)) & plan.resource_tensors
            if used:
                raise UnsupportedOperatorError(f"{where}: operator {k} ({name}) reads a resource handle; intq reads "
                                               "handles only through READ_VARIABLE and ASSIGN_VARIABLE")
            continue
        plan.dropped.add(k)
        handle = ints(op.inputs)[0]
        if handle not in handle_of:
            raise UnsupportedOperatorError(f"{where}: operator {k} ({name}) takes a handle no VAR_HANDLE of subgraph 0 made")
        var = handle_of[handle]
        if name == "READ_VARIABLE":
            out = ints(op.outputs)[0]
            if var in current:
                plan.rename[out] = current[var]
            else:
                current[var] = first_read[var] = out
        else:
            value = ints(op.inputs)[1]
            current[var] = assigned[var] = plan.rename.get(value, value)
    for var in sorted(set(first_read) | set(assigned), key=lambda v: (first_read.get(v, 1 << 30), v)):
        if var not in assigned:
            raise UnsupportedOperatorError(f"{where}: variable {var!r} is read but never assigned; intq carries state "
                                           "only for variables the model updates")
        if var not in initial:
            raise UnsupportedOperatorError(f"{where}: variable {var!r} has no initial value in the CALL_ONCE init "
                                           "subgraph")
        if var in first_read:
            plan.inputs.append(first_read[var])
        plan.outputs.append(assigned[var])
        plan.variables.append({"variable": var, "input": first_read.get(var), "output": assigned[var],
                               "initial": initial[var]})
    return plan


def _variable(op) -> str:
    opts = op.builtinOptions
    container, shared = text(getattr(opts, "container", b"")), text(getattr(opts, "sharedName", b""))
    return f"{container}/{shared}" if container else shared


def _initial_values(f: TfliteFile, index: int) -> dict[str, np.ndarray]:
    """Each variable's value after the init subgraph ``index`` ran: it must only assign constants."""
    subs = f.model.subgraphs or []
    if not 0 <= index < len(subs):
        raise UnsupportedOperatorError(f"{f.where}: CALL_ONCE names subgraph {index}, the model has {len(subs)}")
    sub = subs[index]
    handle_of: dict[int, str] = {}
    values: dict[str, np.ndarray] = {}
    for k, op in enumerate(sub.operators or []):
        name = _op_name(f, op, k)
        if name == "VAR_HANDLE":
            handle_of[ints(op.outputs)[0]] = _variable(op)
        elif name == "ASSIGN_VARIABLE":
            handle, value = ints(op.inputs)[:2]
            stored = read_tensor(f, value, f"{f.where}: init subgraph {index} tensor {value}", subgraph=index)
            if stored.data is None or handle not in handle_of:
                raise UnsupportedOperatorError(f"{f.where}: the init subgraph {index} assigns a computed value "
                                               f"(operator {k}); intq reads constant initial states only")
            values[handle_of[handle]] = stored.data
        else:
            raise UnsupportedOperatorError(f"{f.where}: the init subgraph {index} runs {name} (operator {k}); intq "
                                           "reads init subgraphs of VAR_HANDLE and constant ASSIGN_VARIABLE only")
    return values
