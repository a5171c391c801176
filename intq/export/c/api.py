"""``export_c``: write a graph as ``<prefix>.c`` + ``<prefix>.h`` after compiling and running them.

DESIGN decision 9 (an export is done when its runtime computes what intq says): the files are
generated, compiled exactly as they will be written with the strict flags
(:data:`intq.export.c.runner.STRICT_FLAGS`) when a C compiler is installed, and run on a few
samples (:mod:`intq.export.check`: calibration samples when given, else random inputs within the
input ranges); their outputs must equal intq's target. Only then are they written into
``out_dir``, both files or neither (:class:`intq.files.StagedOutputs`: unique temporary names,
atomic placement). Nothing is written when the graph cannot be generated, the arena exceeds
``arena_limit``, the compiler refuses the code or the compiled code computes other outputs
(unless ``check="warn"``); an existing file is replaced only with ``overwrite=True``.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from intq.export.c import emit
from intq.export.c.compiled import CompiledInterpreter
from intq.export.c.lower import CExportError
from intq.export.c.model import CModel, build
from intq.export.c.runner import CompiledModel, compile_shared, find_compiler
from intq.export.check import ExportCheck, check_c, check_mode
from intq.files import StagedOutputs
from intq.ir import Graph

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class CExportResult:
    """What :func:`export_c` wrote and what the model needs."""

    source: Path
    header: Path
    arena_bytes: int  # <PREFIX>_ARENA_BYTES
    arena_lower_bound: int  # the most bytes live at one step: no plan of these buffers is smaller
    constant_bytes: int  # weights, tables, multipliers, parameter structs (flash)
    compiled_with: str | None  # the compiler that accepted the files (None: none installed)
    model: CModel
    check: ExportCheck | None = None  # the compiled files run against the target (None: check=False)


def export_c(graph: Graph, out_dir, prefix: str = "model", *, target="tflite", arena_limit: int | None = None,
             overwrite: bool = False, check_compile: bool = True, check=True, samples=None,
             outputs: StagedOutputs | None = None) -> CExportResult:
    """Write ``graph`` (an integer graph) as C99 into ``out_dir``: ``<prefix>.c`` and ``<prefix>.h``.

    ``target`` names the arithmetic the code implements (default ``"tflite"``: TensorFlow Lite
    Micro); ``arena_limit`` (bytes) refuses a plan that needs more, naming its size.
    Raises :class:`CExportError` before writing anything for a node the C backend cannot
    generate (naming it) or an arena over the limit. The files are compiled as written
    (``check_compile``; False: neither compiled nor run) and run on a few ``samples`` (dicts ``{input: array}``, e.g. calibration
    samples; default random inputs within the input ranges): ``check=True`` raises
    :class:`~intq.export.check.ExportCheckError` when they compute other outputs than ``target``
    (nothing is written), ``"warn"`` writes them and reports it in ``result.check``, ``False``
    skips the run. ``outputs``: a command's :class:`~intq.files.StagedOutputs` to stage the two
    files into (they land when it commits); by default they are written at once, both or neither.
    """
    mode = check_mode(check)
    if not _IDENTIFIER.match(prefix):
        raise CExportError(f"prefix {prefix!r} is not a C identifier")
    out_dir = Path(out_dir)
    m = build(graph, target, prefix)
    if arena_limit is not None and m.arena_bytes > arena_limit:
        raise CExportError(f"the model needs an arena of {m.arena_bytes} bytes ({m.arena_bytes / 1024:.1f} KiB), over "
                           f"the limit of {arena_limit} bytes (its largest live set is {m.arena_lower_bound} bytes)")
    targets = [out_dir / f"{prefix}.c", out_dir / f"{prefix}.h"]
    for t in targets:
        if t.exists() and not overwrite:
            raise CExportError(f"{t} exists; pass overwrite=True (--force) to replace it")
    files = {f"{prefix}.h": emit.header(m, prefix), f"{prefix}.c": emit.source([(m, prefix)], f"{prefix}.h")}
    compiler = find_compiler() if check_compile else None  # check_compile=False: neither compiled nor run
    report = None
    with tempfile.TemporaryDirectory(prefix="intq-c-") as tmp:
        library = compile_shared(files, Path(tmp) / f"lib{prefix}.so") if compiler is not None else None
        if mode and check_compile:  # the written files, compiled as they are, against the target
            def runner():
                compiled = CompiledModel(library, prefix, m.arena_bytes, m.inputs, m.outputs)
                return CompiledInterpreter.of_library(graph, target, m, compiled)

            report = check_c(graph, runner if library is not None else None, target=str(target), compiler=compiler,
                             samples=samples, mode=mode, where=f"the C files of {graph.name!r}")
    if outputs is not None:
        for name, text in files.items():
            outputs.stage(out_dir / name, text)
    else:
        with StagedOutputs(overwrite=overwrite) as staged:
            for name, text in files.items():
                staged.stage(out_dir / name, text)
    return CExportResult(targets[0], targets[1], m.arena_bytes, m.arena_lower_bound, constant_bytes(m), compiler, m,
                         report)


def constant_bytes(m: CModel) -> int:
    """Bytes of the model's constant data as declared in the generated arrays (excluding code)."""
    sizes = {"int8_t": 1, "int32_t": 4}
    total = 0
    for step in m.steps:
        for d in step.data:
            hit = re.match(r"static const (\w+) \w+\[(\d+)\]", d)
            if hit:
                total += sizes.get(hit.group(1), 4) * int(hit.group(2))
    return total
