"""README's five-minute path, run as written (issue 27 item 1: every file it names exists): each line
of its code block is one ``intq`` command, run in a fresh folder in this process (``intq.cli.main``)."""

import pathlib
import re
import shlex

from intq.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _five_minutes() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index("### Five minutes")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
    return [shlex.split(line.split("#")[0]) for line in block.splitlines() if line.split("#")[0].strip()]


def test_the_five_minute_path_runs_as_written(tmp_path, monkeypatch, capsys):
    commands = _five_minutes()
    assert [c[:2] for c in commands][:3] == [["intq", "demo"], ["intq", "demo"], ["cd", "demo/"]]
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        if argv[0] == "cd":
            monkeypatch.chdir(argv[1])
            continue
        assert argv[0] == "intq", argv
        code = main(argv[1:])
        out = capsys.readouterr()
        assert code == 0, (argv, out.err)
    demo = tmp_path / "demo"
    assert (tmp_path / "digits_int8.tflite").is_file()
    for name in ("digits_cnn.onnx", "calib.npz", "test.npz", "test_labels.npy", "x.npy", "digits_int8.tflite",
                 "report.html", "runs.html"):
        assert (demo / name).is_file(), name
    assert "<dt>accuracy (top-1, labels)</dt>" in (demo / "report.html").read_text()
    assert "<table id=runs>" in (demo / "runs.html").read_text()
    # a second `intq demo` (no -o) neither fails nor replaces a file: the same bytes are kept
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0 and "kept digits_int8.tflite" in capsys.readouterr().out
