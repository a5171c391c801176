#!/usr/bin/env python3
"""Write docs/api.md, the API reference: the signature and docstring of every public name of
``intq`` (``intq.__all__``), of the data adapters and of the analysis functions users call, from
the code itself. tests/test_api_doc.py checks the page is what this writes.

    python tools/make_api_doc.py           # rewrite docs/api.md
    python tools/make_api_doc.py --check   # exit 1 if docs/api.md is out of date
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: (section title, module, names): what users import, in the order a user meets it
SECTIONS = (
    ("The `intq` package", "intq", None),  # None: intq.__all__
    ("Data (`intq.calibration`)", "intq.calibration", ("iter_samples", "iter_batches", "ImagePreprocess")),
    ("Analysis (`intq.analysis`)", "intq.analysis", ("compare", "render_html", "write_html_report")),
    ("Evaluation (`intq.analysis.evaluate`)", "intq.analysis.evaluate", ("evaluate", "load_labels")),
    ("Sensitivity (`intq.analysis.sensitivity`)", "intq.analysis.sensitivity", ("sensitivity",)),
    ("Pipeline stages (`intq.pipeline`)", "intq.pipeline", ("run", "load_float", "check_graph", "convert", "export")),
    ("Optional packages (`intq.extras`)", "intq.extras", ("available", "require", "MissingExtraError")),
)


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _entry(module: str, name: str) -> str:
    obj = getattr(importlib.import_module(module), name)
    kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
    head = f"### `{module}.{name}{_signature(obj) if kind != 'value' else ''}`"
    doc = inspect.getdoc(obj) or "(no docstring)"
    return f"{head}\n\n*{kind}*\n\n```text\n{doc}\n```\n"


def render() -> str:
    import intq

    parts = ["# API reference\n",
             "Generated from the docstrings by `tools/make_api_doc.py` (do not edit: run it; "
             "`tests/test_api_doc.py` checks this page is current). The README's tour shows the API at work; "
             "`intq/calibration/adapters.py` lists the data every function that takes data accepts.\n"]
    for title, module, names in SECTIONS:
        names = list(intq.__all__) if names is None else list(names)
        parts.append(f"## {title}\n")
        parts.extend(_entry(module, n) for n in names)
    return "\n".join(parts)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    page = ROOT / "docs" / "api.md"
    text = render()
    if "--check" in argv:
        if not page.exists() or page.read_text() != text:
            print(f"{page} is out of date: run python tools/make_api_doc.py", file=sys.stderr)
            return 1
        return 0
    page.write_text(text)
    print(f"wrote {page} ({len(text):,} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
