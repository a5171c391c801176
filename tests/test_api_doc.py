"""docs/api.md is what tools/make_api_doc.py writes from the docstrings of the code as it is."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_api_reference_is_current():
    spec = importlib.util.spec_from_file_location("make_api_doc", ROOT / "tools" / "make_api_doc.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text = tool.render()
    assert "### `intq.quantize(" in text and "### `intq.calibration.iter_samples(" in text
    assert (ROOT / "docs" / "api.md").read_text() == text, "docs/api.md is out of date: run python tools/make_api_doc.py"
