"""intq.files: outputs never replace inputs or each other, nothing is overwritten unless asked,
temporary files never take an existing name and never outlive a failure or an interruption."""

import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intq.files import (TEMP_SUFFIX, OutputPathError, StagedOutputs, check_outputs, same_file, stray_temporaries,
                        write_file)


def test_write_file_is_atomic_and_never_overwrites_unasked(tmp_path):
    out = tmp_path / "m.tflite"
    user_tmp = tmp_path / "m.tflite.tmp"  # a user's file with the name older versions used as their temporary
    user_tmp.write_bytes(b"mine")
    assert write_file(out, b"one") == out and out.read_bytes() == b"one"
    with pytest.raises(OutputPathError, match="exists; pass overwrite=True"):
        write_file(out, b"two")
    assert out.read_bytes() == b"one"
    write_file(out, "twö", overwrite=True)
    assert out.read_text(encoding="utf-8") == "twö"
    assert user_tmp.read_bytes() == b"mine" and stray_temporaries([tmp_path]) == []
    with pytest.raises(OutputPathError, match="is a folder"):
        write_file(tmp_path, b"x", overwrite=True)
    deep = tmp_path / "a" / "b" / "c.bin"
    write_file(deep, b"made")  # missing folders are created
    assert deep.read_bytes() == b"made"


def test_permissions_follow_umask_or_the_replaced_file(tmp_path):
    old = os.umask(0o027)
    try:
        write_file(tmp_path / "new", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o640
    (tmp_path / "kept").write_bytes(b"x")
    os.chmod(tmp_path / "kept", 0o604)
    write_file(tmp_path / "kept", b"y", overwrite=True)
    assert stat.S_IMODE((tmp_path / "kept").stat().st_mode) == 0o604


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_an_interrupted_write_leaves_nothing(tmp_path, monkeypatch, failure):
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")

    def boom(fd):
        raise failure()

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(failure):
        write_file(out, b"new" * 1000, overwrite=True)
    assert out.read_bytes() == b"old" and stray_temporaries([tmp_path]) == []


def test_check_outputs_refuses_inputs_and_duplicates(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"m")
    calib = tmp_path / "calib.npz"
    calib.write_bytes(b"c")
    ins = {"MODEL": model, "--calib": calib}
    with pytest.raises(OutputPathError, match="--calib-table .*calib.npz is also the input --calib"):
        check_outputs({"-o": tmp_path / "q.tflite", "--calib-table": calib}, ins, overwrite=True)
    with pytest.raises(OutputPathError, match="same file"):
        check_outputs({"-o": tmp_path / "q.tflite", "--calib-table": tmp_path / "sub" / ".." / "q.tflite"}, ins)
    os.symlink(model, tmp_path / "link.onnx")
    with pytest.raises(OutputPathError, match="is also the input MODEL"):
        check_outputs({"-o": tmp_path / "link.onnx"}, ins, overwrite=True)
    os.link(calib, tmp_path / "hard.npz")
    with pytest.raises(OutputPathError, match="is also the input --calib"):
        check_outputs({"-o": tmp_path / "hard.npz"}, ins, overwrite=True)
    with pytest.raises(OutputPathError, match="exists; pass --force"):
        check_outputs({"-o": model}, {})
    with pytest.raises(OutputPathError, match="is a folder"):
        check_outputs({"-o": tmp_path}, {}, overwrite=True)
    with pytest.raises(OutputPathError, match="is not a folder"):
        check_outputs({"-o": model / "x.tflite"}, {}, overwrite=True)
    ok = check_outputs({"-o": tmp_path / "new" / "q.tflite", "--calib-table": None}, ins)
    assert list(ok) == ["-o"]


def test_staged_outputs_commit_all_or_nothing(tmp_path):
    a, b = tmp_path / "a.tflite", tmp_path / "b.json"
    b.write_text("old")
    with pytest.raises(RuntimeError):
        with StagedOutputs(overwrite=True) as staged:
            staged.stage(a, b"A")
            staged.stage(b, "B")
            assert len(stray_temporaries([tmp_path])) == 2 and not a.exists()
            raise RuntimeError("the command failed after writing")
    assert not a.exists() and b.read_text() == "old" and stray_temporaries([tmp_path]) == []
    staged = StagedOutputs(overwrite=True)
    staged.stage(a, b"A")
    staged.stage(b, "B")
    with pytest.raises(OutputPathError, match="staged twice"):
        staged.stage(tmp_path / "." / "a.tflite", b"again")
    assert staged.commit() == (a, b) and staged.committed == [a, b]
    assert a.read_bytes() == b"A" and b.read_text() == "B" and stray_temporaries([tmp_path]) == []
    # without overwrite, a file that appeared after staging is not replaced
    c = tmp_path / "c.bin"
    late = StagedOutputs()
    late.stage(c, b"intq")
    c.write_bytes(b"appeared meanwhile")
    with pytest.raises(OutputPathError, match="exists"):
        late.commit()
    assert c.read_bytes() == b"appeared meanwhile" and stray_temporaries([tmp_path]) == []


_NAMES = st.sampled_from(["a", "b", "c", "d/a", "d/../a", "./b"])


@settings(max_examples=150, deadline=None)
@given(inputs=st.lists(_NAMES, max_size=3), outputs=st.lists(_NAMES, min_size=1, max_size=3),
       existing=st.sets(st.sampled_from(["a", "b", "c"])), overwrite=st.booleans())
def test_check_outputs_refuses_exactly_the_collisions(tmp_path_factory, inputs, outputs, existing, overwrite):
    """Against an independent statement of the rule: an output is refused iff it resolves to an
    input or to an earlier output, or exists without ``overwrite``."""
    root = tmp_path_factory.mktemp("paths")
    (root / "d").mkdir()
    for name in existing:
        (root / name).write_bytes(b"x")
    real = lambda n: os.path.normpath(os.path.join(root, n))  # noqa: E731
    expect_refused = False
    seen = []
    for o in outputs:
        if real(o) in {real(i) for i in inputs} or real(o) in seen or (os.path.exists(real(o)) and not overwrite):
            expect_refused = True
        seen.append(real(o))
    outs = {f"out{k}": root / o for k, o in enumerate(outputs)}
    ins = {f"in{k}": root / i for k, i in enumerate(inputs)}
    try:
        check_outputs(outs, ins, overwrite=overwrite)
        refused = False
    except OutputPathError:
        refused = True
    assert refused == expect_refused


def test_same_file():
    assert same_file("/tmp/x/../y", "/tmp/y") and not same_file("/tmp/y", "/tmp/z")
    assert TEMP_SUFFIX.startswith(".")


def _interrupted_right_after_creation(monkeypatch):
    """Make the temporary file's creation be followed at once by a signal handler raising
    KeyboardInterrupt (what happens when another thread receives SIGINT: Python runs the CLI's
    handler in the main thread at its next bytecode), deferring it as the CLI's handler does."""
    import intq.files as files

    create = files._temp_for

    def temp_then_interrupt(path, data):
        tmp = create(path, data)
        exc = KeyboardInterrupt()
        if not files.defer_interrupt(exc):
            raise exc
        return tmp

    monkeypatch.setattr(files, "_temp_for", temp_then_interrupt)


def test_an_interrupt_right_after_a_temporary_is_made_leaves_nothing_staged(tmp_path, monkeypatch):
    """Fuzz CI sample seed 17 case 274: ``intq run -o y.npz`` interrupted between the temporary
    file's creation and its registration left ``.y.npz.<random>.intq-tmp`` behind. The interrupt is
    now raised when the section ends, after registration, so discard() removes the file."""
    _interrupted_right_after_creation(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        with StagedOutputs() as staged:
            staged.stage(tmp_path / "y.npz", b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_interrupt_right_after_a_temporary_is_made_leaves_nothing_written(tmp_path, monkeypatch):
    """write_file: the deferred interrupt lands after the rename (the file is complete) and nothing
    temporary remains."""
    _interrupted_right_after_creation(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write_file(tmp_path / "m.tflite", b"model")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tflite"]
    assert (tmp_path / "m.tflite").read_bytes() == b"model"
