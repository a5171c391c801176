"""The ``intq`` command keeps a user's files (issue 17): outputs never replace inputs or each other,
temporary files never take a user's name, a failure or Ctrl-C writes nothing; bad arguments are
usage errors; an unexpected exception is reported as intq's bug, never as a raw traceback.

In-process (``intq.cli.main``): the subprocess form of every command is tests/test_cli.py's."""

import os
import signal

import numpy as np
import pytest

from intq import cli
from intq.files import stray_temporaries
from intq.testing.digits import load_split

MODEL = os.path.join(os.path.dirname(__file__), "..", "intq", "data", "digits_cnn.onnx")
SHAPE = ["--input-shape", "image=1x1x8x8"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_files")
    (x_train, _), (x_test, _) = load_split()
    np.savez(d / "calib.npz", image=x_train[:8])
    np.save(d / "x.npy", x_test[:1])
    assert cli.main(["quantize", MODEL, "--calib", str(d / "calib.npz"), *SHAPE, "-o", str(d / "q.tflite"),
                     "--check-samples", "0"]) == 0
    return d


def _snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _main(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_an_output_is_never_an_input_or_another_output(files, capsys, tmp_path):
    before = _snapshot(files)
    calib = files / "calib.npz"
    q = ["quantize", MODEL, "--calib", calib, *SHAPE, "--check-samples", "0", "--force"]
    code, err = _main(capsys, *q, "-o", tmp_path / "m.tflite", "--calib-table", calib)
    assert code == 2 and "--calib-table" in err and "is also the input --calib" in err
    code, err = _main(capsys, *q, "-o", tmp_path / "m.tflite", "--calib-table", tmp_path / "m.tflite")
    assert code == 2 and "same file" in err
    code, err = _main(capsys, *q, "-o", MODEL)
    assert code == 2 and "is also the input MODEL" in err
    code, err = _main(capsys, "run", files / "q.tflite", "--input", files / "x.npy", "-o", files / "x.npy", "--force")
    assert code == 2 and "is also the input --input" in err
    assert _snapshot(files) == before and not list(tmp_path.iterdir())


def test_temporary_names_never_clobber_a_users_file(files, capsys, tmp_path):
    out = tmp_path / "m.tflite"
    for name in ("m.tflite.tmp", "json.tmp", "ranges.json.tmp", ".m.tflite.tmp"):
        (tmp_path / name).write_text("the user's")
    code, err = _main(capsys, "quantize", MODEL, "--calib", files / "calib.npz", *SHAPE, "--check-samples", "0",
                      "-o", out, "--calib-table", tmp_path / "ranges.json")
    assert code == 0, err
    assert all((tmp_path / n).read_text() == "the user's" for n in ("m.tflite.tmp", "json.tmp", "ranges.json.tmp",
                                                                    ".m.tflite.tmp"))
    assert out.read_bytes()[4:8] == b"TFL3" and stray_temporaries([tmp_path]) == []


def test_run_writes_exactly_the_name_given(files, capsys, tmp_path):
    (tmp_path / "noext.npz").write_bytes(b"precious")
    code, err = _main(capsys, "run", files / "q.tflite", "--input", files / "x.npy", "-o", tmp_path / "noext")
    assert code == 2 and ".npy (one output) or .npz" in err
    assert (tmp_path / "noext.npz").read_bytes() == b"precious" and not (tmp_path / "noext").exists()
    code, _ = _main(capsys, "run", files / "q.tflite", "--input", files / "x.npy", "-o", tmp_path / "y.npz")
    assert code == 0 and set(np.load(tmp_path / "y.npz").files) == {"logits"}


@pytest.mark.parametrize("argv, message", [
    (["--size", "-1", "8"], "must be a positive integer"),
    (["--size", "0", "8"], "must be a positive integer"),
    (["--std", "inf"], "must be a finite number"),
    (["--std", "0"], "must be positive"),
    (["--std", "nan"], "must be a finite number"),
    (["--mean", "nan"], "must be a finite number"),
    (["--check-samples", "-1"], "must be 0 or more"),
    (["--max-tensor-size", "lots"], "is not a size"),
    (["--input-shape", "image=1x0x8x8"], "every dimension must be a positive integer"),
    (["--input-shape", "image=1x1x99999999x99999999"], "over intq's limit"),
])
def test_bad_arguments_are_usage_errors(files, capsys, tmp_path, argv, message):
    code, err = _main(capsys, "quantize", MODEL, "--calib", files / "calib.npz", "-o", tmp_path / "m.tflite", *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def _stage_then(files, failure):
    """A command that stages an output, then fails with ``failure`` (an exception instance)."""
    def command(args):
        args.outputs.stage(args.output, b"half of a model")
        raise failure

    return command


@pytest.mark.parametrize("failure, code, message", [
    (KeyboardInterrupt(), 128 + signal.SIGINT, "interrupted, nothing written"),
    (cli.Interrupted(), 128 + signal.SIGTERM, "interrupted, nothing written"),
    (PermissionError(13, "Permission denied", "/some/file"), 1, "/some/file: Permission denied; nothing was written"),
    (TypeError("unsupported operand"), cli.EXIT_INTERNAL, "internal error: TypeError: unsupported operand\nThis is a "
                                                          "bug in intq"),
    (MemoryError(), cli.EXIT_INTERNAL, "internal error: MemoryError"),
])
def test_every_way_a_command_ends_writes_nothing(files, capsys, tmp_path, monkeypatch, failure, code, message):
    out = tmp_path / "m.tflite"
    out.write_bytes(b"the user's model")
    args = cli.build_parser().parse_args(["run", str(files / "q.tflite"), "--input", str(files / "x.npy"),
                                          "-o", str(out), "--force"])
    monkeypatch.setattr(args, "func", _stage_then(files, failure))
    assert cli._execute(args) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert out.read_bytes() == b"the user's model" and stray_temporaries([tmp_path]) == []


def test_sigterm_becomes_an_interruption(files, capsys, tmp_path, monkeypatch):
    out = tmp_path / "y.npy"

    def command(args):
        args.outputs.stage(args.output, b"partial")
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt the command")

    monkeypatch.setattr(cli, "cmd_run", command)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["run", str(files / "q.tflite"), "--input", str(files / "x.npy"), "-o", str(out)]) == 143
    assert "interrupted, nothing written" in capsys.readouterr().err
    assert not out.exists() and stray_temporaries([tmp_path]) == []
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is main's only


def test_an_interrupt_while_parsing_is_handled(capsys, monkeypatch):
    def parse(self, argv=None, namespace=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.argparse.ArgumentParser, "parse_args", parse)
    assert cli.main(["run", "m.tflite", "--input", "x.npy"]) == 130
    assert "interrupted, nothing written" in capsys.readouterr().err


def test_a_ctrl_c_a_library_turned_into_its_own_error_is_still_an_interruption(files, capsys, tmp_path, monkeypatch):
    """Ctrl-C during a lazy import surfaces as ``ImportError: initialization failed`` (or a
    RuntimeError from ``__set_name__``): the command says "interrupted", not "a bug in intq"."""
    out = tmp_path / "y.npz"

    def command(args):
        args.outputs.stage(args.output, b"partial")
        try:
            os.kill(os.getpid(), signal.SIGINT)
            raise AssertionError("SIGINT was not delivered")
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None

    monkeypatch.setattr(cli, "cmd_run", command)
    assert cli.main(["run", str(files / "q.tflite"), "--input", str(files / "x.npy"), "-o", str(out)]) == 130
    err = capsys.readouterr().err
    assert "interrupted, nothing written" in err and "internal error" not in err
    assert not out.exists() and stray_temporaries([tmp_path]) == []
