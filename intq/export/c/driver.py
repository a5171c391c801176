"""A stand-alone ``main`` for a generated model: runs it on embedded inputs and prints the outputs.

One program serves every place the C runs outside Python: the UBSan build on the host, the
Cortex-M build under ``qemu-system-arm`` (semihosting: ``printf`` reaches the host's stdout)
and the callgrind benchmark (``repeat`` invocations, the last one measured). Output: one line per
sample and output, ``<sample> <output> <hex bytes>``, then ``done``; a non-zero status from the
model prints ``status <n>`` and exits 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from intq.export.c.lower import C_TYPES
from intq.export.c.model import CModel


def driver_source(m: CModel, prefix: str, samples: Sequence[Sequence[np.ndarray]], repeat: int = 1,
                  static_arena: bool = True) -> str:
    """``main.c`` for ``m``: ``samples`` is a list of input lists (int8, the ports' shapes)."""
    P = prefix.upper()
    lines = [f'#include "{prefix}.h"', "#include <stdio.h>", "#include <stdint.h>", "",
             f"static uint64_t arena_words[({P}_ARENA_BYTES + 7) / 8 + 1];  /* 8-byte aligned */"]
    for s, sample in enumerate(samples):
        for k, (x, port) in enumerate(zip(sample, m.inputs)):
            flat = np.ascontiguousarray(x, port.dtype).reshape(-1)
            ctype = C_TYPES[port.dtype]
            body = ",".join(f"INT64_C({int(v)})" if ctype == "int64_t" else str(int(v)) for v in flat)
            lines.append(f"static const {ctype} in_{s}_{k}[{flat.size}] = {{{body}}};")
    for k, port in enumerate(m.outputs):
        lines.append(f"static {C_TYPES[port.dtype]} out_{k}[{int(np.prod(port.shape))}];")
    lines += ["", "static void print_bytes(int s, int k, const void *v, int n) {",
              "    const uint8_t *q = (const uint8_t *)v;",
              "    int i;", '    printf("%d %d ", s, k);',
              '    for (i = 0; i < n; ++i) printf("%02x", (unsigned)q[i]);', '    printf("\\n");', "}", "",
              "int main(void) {", "    int r, status = 0;", "    (void)r;"]
    ins = lambda s: ", ".join(f"in_{s}_{k}" for k in range(len(m.inputs)))  # noqa: E731
    outs = ", ".join(f"out_{k}" for k in range(len(m.outputs)))
    for s in range(len(samples)):
        lines += [f"    for (r = 0; r < {repeat}; ++r) {{",
                  f"        status = {prefix}_invoke({ins(s)}, {outs}, (uint8_t *)arena_words);",
                  f'        if (status) {{ printf("status %d\\n", status); return 1; }}',
                  "    }"]
        for k, port in enumerate(m.outputs):
            lines.append(f"    print_bytes({s}, {k}, out_{k}, {port.nbytes});")
    lines += ['    printf("done\\n");', "    return 0;", "}", ""]
    return "\n".join(lines)


def parse_output(text: str, m: CModel, samples: int) -> list[list[np.ndarray]]:
    """The outputs a driver printed: ``[sample][output]`` int8 arrays of the ports' shapes."""
    got: dict[tuple[int, int], np.ndarray] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit():
            got[int(parts[0]), int(parts[1])] = bytes.fromhex(parts[2])
    if "done" not in text.split():
        raise RuntimeError(f"the driver did not finish: {text[-500:]!r}")
    return [[np.frombuffer(got[s, k], p.dtype).reshape(p.shape) for k, p in enumerate(m.outputs)]
            for s in range(samples)]  # little-endian bytes: the host and Cortex-M alike
