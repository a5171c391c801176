"""docs/engine.md's lists against the registries: the table of target families is TARGETS' own, the
family folders it names are the folders of intq/kernels, and every file "How to add an op" and
"How to add a target" name exists (``<family>`` / ``<op>`` stand for each folder / any module)."""

from __future__ import annotations

import pathlib
import re

from intq.kernels import KERNELS, REFERENCE, TARGETS

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "engine.md").read_text()
FOLDERS = sorted(p.parent.name for p in (ROOT / "intq" / "kernels").glob("*/__init__.py"))


def _section(title: str) -> str:
    start = PAGE.index(title)
    end = re.compile(r"^#{2,3} ", re.M).search(PAGE, start + len(title))
    return PAGE[start:end.start() if end else len(PAGE)]


def test_the_table_of_target_families_is_targets():
    kernels = _section("## Kernels (`intq.kernels`)")
    rows = dict(re.findall(r"^\| `([\w-]+)` \| (.*?) \|$", kernels, re.M))
    assert set(rows) == set(TARGETS), set(rows) ^ set(TARGETS)
    for name, target in TARGETS.items():
        assert tuple(re.findall(r"`(\w+)`", rows[name])) == target.families, (name, rows[name], target.families)


def test_the_family_folders_named_are_the_folders_of_the_kernels():
    kernels = _section("## Kernels (`intq.kernels`)")
    named = set(re.findall(r"`(\w+)/`", kernels))
    assert named == set(FOLDERS), named ^ set(FOLDERS)
    families = {f for _, _, f in KERNELS} - {REFERENCE}
    assert {f for t in TARGETS.values() for f in t.families} == families


def test_every_file_the_how_to_pages_name_exists():
    text = _section("### How to add an op") + _section("### How to add a target")
    paths = set(re.findall(r"`((?:intq|tests|docs)/[\w./<>*-]+)`", text))
    assert len(paths) > 15
    for path in sorted(paths):
        if "<family>" in path:
            for folder in FOLDERS:
                p = path.replace("<family>", folder)
                assert "<op>" in p or (ROOT / p).exists(), p
            continue
        if "<op>" in path:
            assert (ROOT / path.split("<op>")[0]).is_dir(), path
            continue
        assert (list(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()), path
