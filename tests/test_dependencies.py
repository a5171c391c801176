"""The package dependency graph follows DESIGN.md's table (package -> the packages it may use).

Every ``import`` in ``intq/`` is read with ``ast``, at module level **and** inside functions (a
function-level import that hides a package cycle counts like any other), and mapped to the
package it imports from. Each package may use what :data:`MAY_USE` lists and, transitively, what
those may use (a layer may use the layers below it); :data:`FOUNDATION` modules (errors, the
registry shape, limits, files, host facts) are usable by every package. What remains outside the
table is in :data:`ALLOWED`, each entry with the reason; the goal is an empty list. There must be
no cycle between packages either.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import intq

ROOT = Path(intq.__file__).parent

#: Modules every package may use: they import nothing of intq but each other.
FOUNDATION = frozenset({"errors", "registry", "limits", "files", "host", "threads", "extras", "log", "version"})

#: DESIGN.md's table ("Packages"), package -> the packages it may use (transitively). Where this
#: differs from DESIGN.md, the comment says why (the lead updates DESIGN.md from here).
MAY_USE: dict[str, set[str]] = {
    "qmath": set(),
    "ir": {"qmath"},
    # the float operators (intq.runtime.float_ops): pure numpy functions of ONNX operators; the
    # float runtime runs them, constant folding (passes) and the ONNX importer's If folding
    # evaluate constants with them. Its own node so that using them does not mean using the runtime.
    "float_ops": {"ir"},
    "tflite": {"ir"},
    # the ONNX format: schema, op table, metadata, checks, and (DESIGN 24.5) its reader and writer,
    # which state what the kernels prepare (padding, ORT's mean scales, narrow ranges)
    "onnx_format": {"ir", "kernels"},
    "passes": {"ir", "float_ops"},  # DESIGN.md: ir, qmath; constant folding runs the float ops
    "frontends": {"ir", "tflite", "onnx_format", "passes", "float_ops"},  # DESIGN.md: ir, formats; the
    # importers write explicit pads (intq.passes.explicit_pads) and fold If branches (float ops)
    "kernels": {"qmath", "ir"},
    "runtime": {"ir", "kernels", "float_ops", "tflite"},  # tflite: the TFLite Micro oracle reads the file's types
    # not in DESIGN.md's table (issue 28): Ray infrastructure only — connection, workers holding the
    # graphs' interpreters, the shard loop; the packages that shard their work use it
    "distributed": {"ir", "runtime"},
    "calibration": {"ir", "runtime", "distributed"},  # DESIGN.md: ir, runtime; calibration in shards on Ray
    "convert": {"ir", "qmath", "calibration"},  # DESIGN.md: ir, qmath; it reads the CalibrationTable type
    # DESIGN.md: ir. The C generator states what the kernels prepare ("re-derives no multiplier");
    # decision 9: every exporter runs what it wrote in its runtime (intq.export.check)
    "export": {"ir", "kernels", "runtime", "tflite", "onnx_format"},
    "analysis": {"ir", "runtime", "calibration", "convert", "passes", "kernels"},  # "everything above"
    # not in DESIGN.md's table: the data-driven methods (equalization, bias correction, AdaRound,
    # automatic mixed precision) measure float and integer graphs on calibration samples
    "ptq": {"ir", "passes", "calibration", "convert", "runtime", "analysis"},
    # DESIGN.md: torch, convert. QAT imports the module (frontends), simplifies, plans and converts
    # as the pipeline does, and runs the kernels' prepare for its fake quantizers
    "qat": {"frontends", "passes", "calibration", "convert", "runtime", "kernels"},
    # not in DESIGN.md's table: the pipeline in one place (the public API's quantize)
    "pipeline": {"frontends", "passes", "calibration", "convert", "ptq", "export", "analysis", "runtime"},
    "testing": {"ir"},
    "console": set(),  # the command's terminal side: progress lines, log records on stderr
    "cli": {"intq", "console", "pipeline", "frontends", "passes", "calibration", "convert", "ptq", "export", "analysis",
            "runtime", "testing", "kernels"},  # the public API; imported in its functions so that it starts at once
    "intq": {"pipeline", "frontends", "calibration", "runtime", "export", "analysis"},  # the public API (lazy)
}

#: (importing module, imported package) edges outside :data:`MAY_USE`, each with its reason.
ALLOWED: dict[tuple[str, str], str] = {}


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "intq":
        return None
    if len(parts) == 1:
        return "intq"
    if parts[1] == "runtime" and len(parts) > 2 and parts[2] == "float_ops":
        return "float_ops"
    return parts[1]


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        yield ".".join(parts), is_package, ast.parse(path.read_text(), str(path))


def _imports(module: str, is_package: bool, tree: ast.AST):
    """``(imported module, line, inside a function)`` for every import of ``tree``."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        p, in_function = parents.get(node), False
        while p is not None:
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function = True
                break
            p = parents.get(p)
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif node.level:
            base = module.split(".")
            base = base[: len(base) - node.level + (1 if is_package else 0)]
            names = [".".join(base + ([node.module] if node.module else []))]
        else:
            names = [node.module]
            # "from intq import runtime" imports the subpackage
            if node.module == "intq":
                names = [f"intq.{a.name}" for a in node.names]
        for name in names:
            yield name, node.lineno, in_function


def _edges():
    edges = defaultdict(list)  # (from package, to package) -> [(module, line, in function)]
    for module, is_package, tree in _modules():
        src = _package(module)
        for name, line, in_function in _imports(module, is_package, tree):
            dst = _package(name)
            if dst is None or dst == src or dst in FOUNDATION or src in FOUNDATION and dst in FOUNDATION:
                continue
            edges[(src, dst)].append((module, line, in_function))
    return edges


def _closure(package: str) -> set[str]:
    seen, todo = set(), list(MAY_USE.get(package, ()))
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(MAY_USE.get(p, ()))
    return seen


def test_every_package_is_in_the_table():
    packages = {_package(m) for m, _, _ in _modules()} - FOUNDATION
    assert packages <= set(MAY_USE), f"packages missing from the table: {sorted(packages - set(MAY_USE))}"


def test_imports_follow_the_table():
    wrong = []
    for (src, dst), where in sorted(_edges().items()):
        if dst in _closure(src):
            continue
        for module, line, in_function in where:
            if (module, dst) not in ALLOWED:
                wrong.append(f"{module}:{line} imports {'intq' if dst == 'intq' else 'intq.' + dst} "
                             f"({'in a function' if in_function else 'module level'}); "
                             f"{src} may use {sorted(_closure(src))}")
    assert not wrong, "\n".join(wrong)


def test_no_cycle_between_packages():
    graph = defaultdict(set)
    for (src, dst), where in _edges().items():
        graph[src].add(dst)
    # Tarjan's strongly connected components: a component of more than one package is a cycle
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    assert not found, f"package cycles: {found}"


def test_the_allow_list_is_still_needed():
    """An entry of :data:`ALLOWED` that no import needs any more is removed (the list only shrinks)."""
    used = {(module, dst) for (src, dst), where in _edges().items() for module, _, _ in where}
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"stale allow-list entries: {stale}"
