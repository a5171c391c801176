"""The layout of intq.kernels (issue 24): one registry, reference kernels that know no runtime, one
folder per runtime family, an acyclic module graph.

* every import inside intq/kernels (module level or in a function) forms an acyclic graph, and no
  function imports an intq module (a lazy import there could only hide a cycle);
* a reference module (``intq/kernels/*.py``) names no runtime or target branch and imports no
  family folder; the family folders hold every variant;
* every family a target lists has its folder (and every folder is a family some target lists);
* a variant's ``run`` takes the inputs its reference ``run`` takes (the plan checks a node's input
  count against the reference), and no ``run`` dispatches on its parameters' type more than twice;
* every C lowering binds a kernel of the registry.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import re
import textwrap

import pytest

import intq.kernels as pkg
from intq.kernels import KERNELS, REFERENCE, TARGETS, reference

ROOT = pathlib.Path(pkg.__file__).parent
#: The tables of intq.kernels, not kernels: the target rows name their runtimes, the integer-only
#: exemptions name the variant functions they exempt, the package imports every module.
TABLES = {"targets.py", "integer_only.py", "__init__.py"}
#: What a reference kernel never writes: a runtime or target branch (issue 24's grep) or a family's module.
FORBIDDEN = re.compile(r"is_ort|Runtime\.|TPU_MLIR|ort-u8|\.optimized|\.xnnpack|KernelSet|target\.runtime|"
                       r"target\.families|intq\.kernels\.(?:ort|tpu_mlir|litert|litert_opt|xnnpack)\b")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
FAMILY_FOLDERS = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))


def _imports(name: str) -> list[tuple[str, bool, int]]:
    """(imported intq module, at module level?, line) of every import statement in module ``name``."""
    tree = ast.parse(MODULES[name].read_text())
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t.startswith("intq"):
                found.append((t, id(node) in top, node.lineno))
    return found


def _edges() -> dict[str, set[str]]:
    return {name: {t for t, _, _ in _imports(name) if t in MODULES and t != name} for name in MODULES}


def test_the_module_graph_of_intq_kernels_is_acyclic():
    edges, state, cycle = _edges(), {}, []

    def visit(n, path):
        state[n] = "open"
        for m in sorted(edges[n]):
            if state.get(m) == "open":
                cycle.append(path[path.index(m):] + [m])
            elif m not in state:
                visit(m, path + [m])
        state[n] = "done"

    for n in sorted(edges):
        if n not in state:
            visit(n, [n])
    assert not cycle, f"import cycles: {cycle}"


def test_no_function_level_import_of_intq_inside_the_kernels():
    lazy = [f"{name}:{line} imports {t}" for name in MODULES for t, top, line in _imports(name) if not top]
    assert not lazy, lazy


@pytest.mark.parametrize("path", sorted(p.name for p in ROOT.glob("*.py") if p.name not in TABLES))
def test_a_reference_module_names_no_runtime(path):
    text = (ROOT / path).read_text()
    if path == "base.py":  # the registry: select_kernel walks the target's families
        text = text.replace("ctx.target.families", "")
    hits = [f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in FORBIDDEN.finditer(text)]
    assert not hits, hits
    name = _module_name(ROOT / path)
    families = {f"intq.kernels.{f}" for f in FAMILY_FOLDERS}
    imported = {t for t, _, _ in _imports(name)}
    assert not imported & families and not any(t.startswith(tuple(f + "." for f in families)) for t in imported)


def test_every_variant_lives_in_its_familys_folder():
    for (op, act, family), k in KERNELS.items():
        parts = k.module.__name__.split(".")
        if family == REFERENCE:
            assert len(parts) == 3, (op, act, k.module.__name__)  # intq.kernels.<op module>
            continue
        folder = parts[2]
        assert len(parts) == 4 and folder in FAMILY_FOLDERS, (op, act, family, k.module.__name__)
        assert family == folder or (family.startswith(folder + "_") and family not in FAMILY_FOLDERS), (family, folder)
        assert (op, act, REFERENCE) in KERNELS, f"variant {(op, act, family)} has no reference kernel to fall back to"


def test_every_family_of_a_target_has_a_folder_and_variants():
    named = {f for t in TARGETS.values() for f in t.families}
    registered = {family for _, _, family in KERNELS} - {REFERENCE}
    assert named == registered, (named ^ registered)
    folders = {f if f in FAMILY_FOLDERS else f.split("_")[0] for f in named}
    assert folders == set(FAMILY_FOLDERS)


def _arity(fn) -> tuple[int, int | None]:
    params = list(inspect.signature(fn).parameters.values())[1:]
    most = None if any(p.kind is p.VAR_POSITIONAL for p in params) else len(params)
    return sum(1 for p in params if p.default is p.empty and p.kind is not p.VAR_POSITIONAL), most


@pytest.mark.parametrize("key", sorted(k for k in KERNELS if k[2] != REFERENCE), ids="-".join)
def test_a_variant_run_takes_the_reference_inputs(key):
    least, most = _arity(reference(key[0], key[1]).run)
    for run in KERNELS[key].runs:
        v_least, v_most = _arity(getattr(run, "py_func", run))
        assert v_least <= least and (v_most is None or (most is not None and v_most >= most)), (key, run)


def _type_checks(fn) -> int:
    fn = getattr(fn, "py_func", fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError):
        return 0
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            n += 1
        elif isinstance(node, ast.Compare) and any(
                isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == "type"
                for s in (node.left, *node.comparators)):
            n += 1
    return n


def test_no_run_dispatches_on_its_parameters_type_more_than_twice():
    ladders = {f"{k.module.__name__}.{r.__name__}": _type_checks(r) for k in KERNELS.values() for r in k.runs}
    assert all(n <= 2 for n in ladders.values()), {k: n for k, n in ladders.items() if n > 2}


def test_every_c_lowering_binds_a_registered_kernel():
    from intq.export.c.lower import LOWERINGS

    assert set(LOWERINGS) <= set(KERNELS), set(LOWERINGS) - set(KERNELS)
