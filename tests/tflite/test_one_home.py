"""The .tflite format has one home: who may import whom, and what is defined only once."""

import ast
import importlib.util
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "intq"


def _tree(relative: str) -> ast.Module:
    return ast.parse((PACKAGE / relative).read_text())


def _imports(relative: str) -> set[str]:
    names = set()
    for node in ast.walk(_tree(relative)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _all_modules() -> list[str]:
    return [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py"))]


def test_importer_and_exporter_use_the_format_package_not_each_other():
    importer, exporter = _imports("frontends/from_tflite.py"), _imports("export/tflite_writer.py")
    assert not [m for m in importer if m.startswith("intq.export")], importer
    assert not [m for m in exporter if m.startswith("intq.frontends")], exporter
    assert any(m.startswith("intq.tflite") for m in importer) and any(m.startswith("intq.tflite") for m in exporter)
    for module in _all_modules():
        if module.startswith("tflite/"):  # the format package sits below both stages
            assert not [m for m in _imports(module) if m.startswith(("intq.frontends", "intq.export"))], module


def test_identifier_and_graph_error_are_defined_once():
    identifiers = [m for m in _all_modules() for node in ast.walk(_tree(m))
                   if isinstance(node, ast.Constant) and node.value == b"TFL3"]
    assert identifiers == ["tflite/schema.py"]
    graph_errors = [m for m in _all_modules() for node in ast.walk(_tree(m))
                    if isinstance(node, ast.ClassDef) and node.name == "GraphError"]
    assert graph_errors == ["errors.py"]


@pytest.mark.parametrize("old", ["intq.export.litert_oracle", "intq.export.tflm_oracle", "intq.export.tflite_flatbuffer",
                                 "intq.export.tflite_ops"])
def test_old_module_paths_are_gone(old):
    assert importlib.util.find_spec(old) is None
