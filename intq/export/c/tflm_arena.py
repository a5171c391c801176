"""What TensorFlow Lite Micro's arena needs for the same model, for the C export's report.

TFLM's RecordingMicroAllocator (``print_allocations`` of the tflite-micro package) prints the
arena's *head* (the non-persistent tensors, planned by its GreedyMemoryPlanner) and *tail* (the
persistent part: tensor structs, per-channel multipliers and shifts, node structs); a user must
provide ``total = head + tail``. The numbers are printed by TFLM's C code (MicroPrintf, to stderr on the host), so they
are read from a child process.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from intq.errors import IntqError


@dataclass(frozen=True)
class TflmArena:
    total: int  # what MicroInterpreter needs: head + tail
    head: int  # non-persistent: the planned activations
    tail: int  # persistent: structs, quantization data, kernel buffers


def tflm_arena(model_bytes: bytes, arena_size: int = 64 * 1024 * 1024) -> TflmArena:
    """TFLite Micro's arena use for ``model_bytes`` (a .tflite), measured by its allocator."""
    import subprocess

    probe = ("import sys\nfrom tflite_micro.python.tflite_micro import runtime\n"
             "m = sys.stdin.buffer.read()\ni = runtime.Interpreter.from_bytes(m, arena_size=int(sys.argv[1]), "
             "intrepreter_config=runtime.InterpreterConfig.kAllocationRecording)\ni.print_allocations()\n")
    # print_allocations writes through C's stdout: run it in a child process and read its output
    done = subprocess.run([sys.executable, "-c", probe, str(arena_size)], input=bytes(model_bytes),
                          capture_output=True)
    text = done.stderr.decode(errors="replace")  # TFLM's MicroPrintf writes to stderr on the host
    if done.returncode != 0:
        raise IntqError(f"TFLite Micro could not allocate the model: {text[-500:]}")
    values = {k: int(v) for k, v in re.findall(r"Arena allocation (total|head|tail) (\d+) bytes", text)}
    if set(values) != {"total", "head", "tail"}:
        raise IntqError(f"could not read TFLite Micro's allocation report: {text[:300]!r}")
    return TflmArena(values["total"], values["head"], values["tail"])
