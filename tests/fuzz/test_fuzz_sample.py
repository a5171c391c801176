"""The fuzz campaign in CI (issue 17): a fixed-seed sample of tools/fuzz.py must end with no
traceback, hang, crash, silently wrong result or lost file — and the judge must see each of those
when they happen (its self-test)."""

import json
import subprocess
import sys
from pathlib import Path

from tests.fuzz import cases
from tests.fuzz.runner import DEFECTS, OUTCOMES

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = 500  # the minimum; a few minutes on two cores (tests/fuzz/runner.py)
SEED = 17


def _fuzz(tmp_path, *args, timeout=900):
    out = tmp_path / "fuzz.json"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "fuzz.py"), "--quiet", "--json", str(out), *args],
                       capture_output=True, text=True, timeout=timeout)
    assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    return r, json.loads(out.read_text())


def test_the_ci_sample_finds_nothing_and_the_judge_sees_everything(tmp_path):
    """500 cases: no defect. Plus the judge's self-test in the same run: cases built to end as a
    traceback, a hang, a crash, a MemoryError, a lost file and a silent acceptance are classified
    as such (a judge that saw nothing would make the sample vacuous)."""
    r, report = _fuzz(tmp_path, "--cases", str(SAMPLE), "--seed", str(SEED), "--jobs", "2", "--selftest")
    summary = report["summary"]
    total = summary["table"]["total"]
    assert summary["cases"] == SAMPLE
    assert not any(total.get(c) for c in DEFECTS), r.stdout[-6000:]
    assert summary["selftest"] == {name: outcome for name, (outcome, _) in cases.SELFTEST.items()}, summary["selftest"]
    assert r.returncode == 0
    ran = {f: sum(v.values()) for f, v in summary["table"].items() if f != "total"}
    weighted = {f for f, (w, _) in cases.FAMILIES.items() if w}
    assert set(ran) == weighted and min(ran.values()) >= 15, ran  # every family, each a fair share
    # the oracles judged a fair share: models intq ran and a runtime ran too, compared
    compared = sum(1 for x in report["results"] if (x.get("info") or {}).get("oracle") == "ok")
    assert compared >= 40, compared


def test_the_tool_plans_the_families_the_cases_define():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import fuzz
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert fuzz.FAMILY_WEIGHTS == {f: w for f, (w, _) in cases.FAMILIES.items() if w}
    assert set(fuzz.SELFTEST) == set(cases.SELFTEST)
    assert set(OUTCOMES) >= {o for o, _ in cases.SELFTEST.values()}
