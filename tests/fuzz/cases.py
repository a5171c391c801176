"""The fuzz families: how each case is built, run and judged.

A case is ``(family, seed)``. :func:`execute` (in the forked child of :mod:`tests.fuzz.runner`)
builds its inputs in a fresh working folder from the seed corpus, snapshots the folder, runs one
action the way a user would (the Python API, or ``intq.cli.main`` with its arguments), and judges:

* ``ok`` — it ran, and where an independent oracle exists it agrees (a ``.tflite`` intq runs must
  give LiteRT's / TFLite Micro's outputs exactly; an ONNX model intq runs in float must give
  onnxruntime's within 1e-3 relative);
* ``clean`` — it refused with an :class:`intq.errors.IntqError` (CLI: exit 1 or 2 with one paragraph);
* ``traceback`` — any other exception, an "internal error" of the CLI, or a Python traceback printed;
* ``silently_wrong`` — it ran where it must refuse (the case's expectation), or disagrees with the oracle;
* ``lost_file`` — a file that existed changed or vanished without ``--force``, an output appeared
  though the command failed, or a temporary file was left behind.

``hang`` and ``crash`` are decided by the runner. Families and weights: :data:`FAMILIES`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import signal
import sys
import traceback
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from tests.fuzz import mutate_bytes, mutate_onnx, mutate_tflite
from tests.fuzz.seeds import CONVERTIBLE, onnx_seeds, tflite_seeds

TEMP_MARKERS = (".intq-tmp",)
#: exceptions that are a bug wherever they come from, even wrapped in an intq error by a catch-all
MASKED_BUGS = (NameError, AttributeError, AssertionError, RecursionError, MemoryError, SyntaxError)


# ------------------------------------------------------------------------------------ corpus


@dataclass
class Corpus:
    onnx: list
    tflite: list
    folder: Path
    intq_errors: frozenset[str]

    @classmethod
    def build(cls, folder: Path) -> "Corpus":
        """Seeds, the names of intq's exception classes, and a warm process (every kernel the
        seeds use compiled, the CLI imported) so that forked cases start at once."""
        import intq
        import intq.cli  # noqa: F401
        from intq.errors import IntqError
        from intq.runtime.oracles.litert import run_litert
        from intq.runtime.oracles.tflm import run_tflm

        with contextlib.suppress(ImportError):
            import onnxruntime  # noqa: F401
        folder.mkdir(parents=True, exist_ok=True)
        onnx_list = onnx_seeds()
        for s in onnx_list:
            s.bytes = s.model.SerializeToString()
        tfl = tflite_seeds(onnx_list)
        for s in tfl:  # warm: every kernel of the seeds prepared and run once on each target
            with contextlib.suppress(Exception):
                g = intq.load(s.data)
                feeds = _random_inputs(g, np.random.default_rng(0))
                for target in ("tflite", "litert-ref", "litert-opt", "xnnpack"):
                    with contextlib.suppress(Exception):
                        intq.Interpreter(g, target=target).run(feeds)
                run_litert(s.data, [feeds[n] for n in g.inputs], preserve_all_tensors=False)
                run_tflm(s.data, [feeds[n] for n in g.inputs], preserve_all_tensors=False)
        for s in onnx_list:
            with contextlib.suppress(Exception):
                intq.Interpreter(intq.load(s.model, input_shapes=s.shapes)).run(s.data[0])
        (folder.parent / "outside.bin").write_bytes(b"\x01" * 4096)  # what '../outside.bin' external data names
        import pkgutil

        for info in pkgutil.walk_packages(intq.__path__, "intq."):  # every error class intq defines
            if not info.name.startswith(("intq.qat", "intq.testing")):
                with contextlib.suppress(Exception):
                    __import__(info.name)
        names = set()
        todo = [IntqError]
        while todo:
            c = todo.pop()
            names.add(c.__name__)
            todo.extend(c.__subclasses__())
        names.update({"UsageError"})
        return cls(onnx_list, tfl, folder, frozenset(names))


def _random_inputs(graph, rng) -> dict[str, np.ndarray]:
    """One array per graph input: its declared shape (dynamic dims as 1), random values of its dtype."""
    feeds = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        shape = tuple(1 if d is None else int(d) for d in (t.shape or ()))
        if np.dtype(t.dtype).kind == "f":
            feeds[name] = rng.standard_normal(shape).astype(t.dtype)
        elif np.dtype(t.dtype).kind in "iu":
            info = np.iinfo(t.dtype)
            feeds[name] = rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(t.dtype)
        elif np.dtype(t.dtype) == np.bool_:
            feeds[name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[name] = np.zeros(shape, t.dtype)
    return feeds


# ------------------------------------------------------------------------------ verdict state


class Verdict(Exception):
    """Raised by a family to end the case with a verdict (outcome, detail, group)."""

    def __init__(self, outcome: str, detail: str, group: str = ""):
        super().__init__(detail)
        self.outcome, self.detail, self.group = outcome, detail, group


@dataclass
class Ctx:
    """One case being executed: its rng, folder, corpus, and what its files may do."""

    spec: dict
    rng: np.random.Generator
    corpus: Corpus
    work: Path
    started: callable
    what: list[str] = field(default_factory=list)  # the mutations / setup, for the report
    before: dict | None = None
    may_create: set[str] = field(default_factory=set)
    may_change: set[str] = field(default_factory=set)
    expect_refusal: str | None = None  # why this case must be refused (else running is a silent wrong)
    committed: set[str] = field(default_factory=set)  # outputs an interrupted command says it wrote
    info: dict = field(default_factory=dict)

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def snapshot(self) -> None:
        self.before = _files(self.work)

    def refuse_because(self, why: str) -> None:
        if self.expect_refusal is None:
            self.expect_refusal = why

    def ran(self, detail: str = "") -> None:
        """The action completed: a silent wrong if the case had to be refused."""
        if self.expect_refusal:
            raise Verdict("silently_wrong", f"accepted: {self.expect_refusal}; {detail}".strip("; "),
                          f"accepted {self.expect_refusal.split(':')[0]}")


def _files(folder: Path) -> dict[str, str]:
    out = {}
    for root, dirs, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            try:
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, folder)] = hashlib.sha1(fh.read()).hexdigest()
            except OSError:
                out[os.path.relpath(p, folder)] = "unreadable"
    return out


def interrupt_plan(spec: dict):
    """(signal, seconds after the command starts) for interrupt cases, else None."""
    if spec["family"] != "interrupt":
        return None
    r = random.Random(spec["seed"] ^ 0x5EED)
    # at least 50 ms after the child says it starts the command: a signal landing in the harness's own
    # few instructions before intq.cli.main (a loaded machine can hold the child there for ms) is not
    # a Ctrl-C of intq's
    return (signal.SIGINT if r.random() < 0.75 else signal.SIGTERM, r.uniform(0.05, 0.8))


# --------------------------------------------------------------------------------- execution


def execute(spec: dict, corpus: Corpus, work: Path, started) -> dict:
    """Build, run and judge one case (in the forked child)."""
    from intq.errors import IntqError

    ctx = Ctx(spec, np.random.default_rng(spec["seed"]), corpus, work, started)
    try:
        try:
            FAMILIES[spec["family"]][1](ctx)
            verdict = {"outcome": "ok", "detail": "; ".join(ctx.what)}
        except Verdict as v:
            verdict = {"outcome": v.outcome, "detail": f"{'; '.join(ctx.what)} => {v.detail}",
                       "group": v.group or v.detail[:80]}
        except IntqError as e:
            if ctx.before is None:  # the harness's own setup raised: a harness bug
                raise
            cause = e.__cause__
            if isinstance(cause, MASKED_BUGS):  # an intq error wrapping what can only be a bug
                verdict = {"outcome": "traceback", "detail": f"{'; '.join(ctx.what)} => {type(e).__name__} wrapping "
                           f"{type(cause).__name__}: {str(e)[:300]}",
                           "group": f"{type(cause).__name__} (wrapped) at {_where(cause)}"}
            else:
                verdict = {"outcome": "clean", "detail": f"{'; '.join(ctx.what)} => {type(e).__name__}: {str(e)[:200]}"}
                if cause is not None and not isinstance(cause, IntqError):
                    ctx.info["wrapped"] = f"{type(cause).__name__} at {_where(cause)}"
        except (Exception, KeyboardInterrupt) as e:
            if ctx.before is None:
                raise
            verdict = {"outcome": "traceback",
                       "detail": f"{'; '.join(ctx.what)} => {type(e).__name__}: {str(e)[:300]}",
                       "group": f"{type(e).__name__} at {_where(e)}"}
        _block_signals()
    except BaseException as e:  # harness failure (setup, or the judge itself)
        _block_signals()
        return {"outcome": "traceback", "detail": f"harness: {type(e).__name__}: {e} at {_where(e, harness=True)}",
                "group": f"harness {type(e).__name__} at {_where(e, harness=True)}"}
    verdict["info"] = ctx.info
    if ctx.before is not None and verdict["outcome"] not in ("silently_wrong",):
        lost = _lost_files(ctx, verdict["outcome"] == "ok")
        if lost:
            verdict = {"outcome": "lost_file", "detail": f"{'; '.join(ctx.what)} => {lost}",
                       "group": f"lost file: {lost.split(':')[0]}", "info": ctx.info}
    return verdict


def _block_signals() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _where(e: BaseException, harness: bool = False) -> str:
    """The innermost intq frame (file:line function) of a traceback; the innermost frame at all if none."""
    frames = traceback.extract_tb(e.__traceback__)
    mine = [f for f in frames if "/intq/" in f.filename and "/tests/" not in f.filename]
    if harness:
        mine = [f for f in frames if "/tests/fuzz/" in f.filename]
    f = (mine or frames or [None])[-1]
    if f is None:
        return "?"
    where = f.filename.split("/intq/")[-1] if "/intq/" in f.filename else os.path.basename(f.filename)
    return f"{where}:{f.lineno} {f.name}"


def _lost_files(ctx: Ctx, succeeded: bool) -> str:
    after = _files(ctx.work)
    for p, digest in ctx.before.items():
        if p not in after:
            return f"deleted: {p}"
        if after[p] != digest and not ((succeeded or p in ctx.committed) and p in ctx.may_change):
            return f"changed: {p}"
    for p in sorted(set(after) - set(ctx.before)):
        declared = (succeeded or p in ctx.committed) and p in ctx.may_create
        if any(m in p for m in TEMP_MARKERS) or (p.endswith(".tmp") and not declared):
            return f"temporary left behind: {p}"
        if not declared:
            return f"written by a command that {'failed' if not succeeded else 'did not announce it'}: {p}"
    return ""


# ------------------------------------------------------------------------------ actions


def run_cli(ctx: Ctx, argv: list[str], outputs: tuple[str, ...] = (), force: bool = False,
            interrupted_ok: bool = False) -> int:
    """``intq.cli.main(argv)`` as a user runs it; judges the exit code and the message.

    ``outputs`` may appear (and, with ``force``, replace existing files) when the exit code is 0.
    """
    import intq.cli

    ctx.may_create.update(os.path.normpath(o) for o in outputs)  # as the snapshot names them
    if force:
        ctx.may_change.update(os.path.normpath(o) for o in outputs)
    if ctx.before is None:
        ctx.snapshot()
    out, err = io.StringIO(), io.StringIO()
    ctx.started()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = intq.cli.main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except KeyboardInterrupt:
            _block_signals()
            raise Verdict("traceback", "KeyboardInterrupt escaped the command (a raw traceback for the user)",
                          "KeyboardInterrupt escaped the CLI")
    _block_signals()
    text = err.getvalue()
    ctx.info["exit"] = code
    ctx.info["stderr"] = text[-300:]
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "Traceback (most recent call last)" in text:
        raise Verdict("traceback", f"exit {code}, a traceback printed: {text[-300:]}", "traceback printed by the CLI")
    if "internal error" in first or code == 70:
        raise Verdict("traceback", f"exit {code}: {text[:300]}", f"internal error: {_error_name(first)} "
                      f"{_first_words(text)}")
    if code in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        if not interrupted_ok:
            raise Verdict("traceback", f"exit {code} without an interrupt: {text[:200]}", "unexpected exit code")
        if "interrupted" not in first:
            raise Verdict("traceback", f"exit {code} without saying so: {text[:200]}", "interrupt not reported")
        if "interrupted after writing " in first:  # the signal came once the outputs were in place: it says so
            written = first.split("interrupted after writing ", 1)[1].split(", ")
            ctx.committed.update(os.path.normpath(p) for p in written)
        raise Verdict("clean", f"interrupted: {first}")
    if code == 0:
        ctx.ran(f"exit 0 for intq {' '.join(argv)[:200]}")
        missing = [o for o in outputs if not (ctx.work / o).exists() and o in _announced(argv)]
        if missing:
            raise Verdict("silently_wrong", f"exit 0 but {missing} not written", "output missing after success")
        return code
    if code not in (1, 2):
        raise Verdict("traceback", f"exit {code}: {text[:300]}", f"exit code {code}")
    name = _error_name(first)
    if name and name not in ctx.corpus.intq_errors:
        raise Verdict("traceback", f"exit {code}: {text[:300]}", f"{name} reported as a failure")
    raise Verdict("clean", f"exit {code}: {first[:200]}")


def _announced(argv: list[str]) -> set[str]:
    out = set()
    for flag in ("-o", "--output", "--calib-table", "--html"):
        if flag in argv:
            i = argv.index(flag)
            if i + 1 < len(argv):
                out.add(argv[i + 1])
    return out


def _error_name(first_line: str) -> str:
    """``intq quantize: TypeError: ...`` -> ``TypeError``; ``""`` when the line names no class."""
    parts = first_line.split(": ")
    for p in parts[1:3]:
        if p.isidentifier() and (p.endswith("Error") or p.endswith("Exception") or p in ("KeyboardInterrupt",)):
            return p
    return ""


def _first_words(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return " ".join(line.split(": ", 3)[-1].split()[:6])


def in_grandchild(fn, timeout: float = 20.0):
    """``fn()`` in a forked process (an oracle may crash on a broken model): ("ok", value),
    ("error", message), ("crash", signal) or ("timeout", None)."""
    import pickle
    import select
    import time

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            try:
                payload = ("ok", fn())
            except BaseException as e:  # the oracle refused
                payload = ("error", f"{type(e).__name__}: {str(e)[:300]}")
            data = pickle.dumps(payload)
            view = memoryview(data)
            while view:
                n = os.write(wfd, view)
                view = view[n:]
        finally:
            os._exit(0)
    os.close(wfd)
    chunks = []
    deadline = time.monotonic() + timeout
    while True:
        r, _, _ = select.select([rfd], [], [], max(deadline - time.monotonic(), 0))
        if not r:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(rfd)
            return ("timeout", None)
        data = os.read(rfd, 1 << 20)
        if not data:
            break
        chunks.append(data)
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return ("crash", os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
    return pickle.loads(b"".join(chunks))


def _compare_exact(mine: list[np.ndarray], theirs: list[np.ndarray], what: str) -> None:
    if len(mine) != len(theirs):
        raise Verdict("silently_wrong", f"{what}: intq gives {len(mine)} outputs, the oracle {len(theirs)}",
                      f"{what}: output count differs")
    for k, (a, b) in enumerate(zip(mine, theirs)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise Verdict("silently_wrong", f"{what}: output {k} is {a.dtype}{list(a.shape)}, the oracle's "
                          f"{b.dtype}{list(b.shape)}", f"{what}: output shape/dtype differs")
        if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            bad = int(np.sum(a != b))
            raise Verdict("silently_wrong", f"{what}: output {k}: {bad} of {a.size} elements differ",
                          f"{what}: output values differ")


def _compare_close(mine: dict, theirs: dict, what: str) -> None:
    if list(mine) != list(theirs):
        raise Verdict("silently_wrong", f"{what}: outputs {list(mine)[:4]} vs the oracle's {list(theirs)[:4]}",
                      f"{what}: output names differ")
    for k in mine:
        a, b = np.asarray(mine[k]), np.asarray(theirs[k])
        if a.shape != b.shape:
            raise Verdict("silently_wrong", f"{what}: {k!r} is {list(a.shape)}, the oracle's {list(b.shape)}",
                          f"{what}: output shape differs")
        if a.dtype.kind in "biu" or b.dtype.kind in "biu":
            ok = np.array_equal(a, b)
        else:
            finite = np.isfinite(b)
            scale = float(np.max(np.abs(b[finite]))) if finite.any() else 1.0
            ok = np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-3, atol=1e-4 * max(scale, 1.0),
                             equal_nan=True)
        if not ok:
            raise Verdict("silently_wrong", f"{what}: {k!r} differs from the oracle", f"{what}: output values differ")


# -------------------------------------------------------------------- model actions, shared


TFLITE_ORACLES = {"litert-ref": "ref", "litert-opt": "opt", "xnnpack": "xnnpack", "tflite": "tflm"}


def run_tflite(ctx: Ctx, data: bytes) -> None:
    """Load and run a .tflite with intq; an oracle must give the same outputs when it runs too."""
    import intq

    target = ctx.pick(["litert-ref", "litert-ref", "tflite", "tflite", "litert-opt", "xnnpack"])
    ctx.what.append(f"run target {target}")
    ctx.snapshot()
    ctx.started()
    g = intq.load(data)
    feeds = _random_inputs(g, ctx.rng)
    it = intq.Interpreter(g, target=target)
    out = it.run(feeds)
    ctx.ran("intq ran the model")
    mine = [out[o] for o in g.outputs]
    _tflite_oracle(ctx, data, [feeds[n] for n in g.inputs], mine, target)


def _tflite_oracle(ctx: Ctx, data: bytes, ordered: list, mine: list, target: str) -> None:
    from intq.runtime.oracles.litert import run_litert
    from intq.runtime.oracles.tflm import run_tflm

    resolver = TFLITE_ORACLES[target]
    if resolver == "tflm":
        status, value = in_grandchild(lambda: run_tflm(data, ordered, preserve_all_tensors=False)["outputs"])
    else:
        status, value = in_grandchild(lambda: run_litert(data, ordered, resolver=resolver,
                                                         preserve_all_tensors=False)["outputs"])
    ctx.info["oracle"] = status
    if status == "ok":
        _compare_exact(mine, value, f"{target} vs its runtime")
    elif status == "error":
        ctx.info["oracle_error"] = value[:160]


def _write_onnx(ctx: Ctx, model: onnx.ModelProto, name: str = "model.onnx") -> Path:
    path = ctx.work / name
    try:
        path.write_bytes(model.SerializeToString())
    except Exception as e:  # protobuf refuses to serialise (e.g. an invalid UTF-8 string field)
        raise Verdict("ok", f"unserialisable mutation ({type(e).__name__})", "unserialisable") from None
    return path


def _external_outside(model: onnx.ModelProto, folder: Path) -> str:
    """The first external-data location of ``model`` that is not a file inside ``folder``."""
    tensors = list(model.graph.initializer) + [a.t for n in model.graph.node for a in n.attribute if a.HasField("t")]
    for t in tensors:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            loc = next((e.value for e in t.external_data if e.key == "location"), "")
            full = os.path.realpath(os.path.join(folder, loc))
            if os.path.isabs(loc) or not full.startswith(os.path.realpath(folder) + os.sep):
                return loc
    return ""


def run_onnx(ctx: Ctx, model: onnx.ModelProto, seed) -> None:
    """Float import and run, compared with onnxruntime; or the whole quantization, compared with
    LiteRT and TFLite Micro on the exported file; or the command line's quantize."""
    import intq

    path = _write_onnx(ctx, model)
    outside = _external_outside(model, ctx.work)
    if outside:
        ctx.refuse_because(f"external data outside the model's folder: {outside!r}")
    action = ctx.pick(["float"] * 6 + ["quantize"] * 3 + ["cli"] * 1)
    ctx.what.append(action)
    if action == "cli":
        np.savez(ctx.work / "calib.npz", **{k: np.concatenate([d[k] for d in seed.data]) for k in seed.data[0]})
        shapes = [a for k, s in seed.shapes.items() for a in ("--input-shape", f"{k}={'x'.join(map(str, s))}")]
        run_cli(ctx, ["quantize", "model.onnx", "--calib", "calib.npz", "-o", "out.tflite", *shapes,
                      "--check-samples", "2"], outputs=("out.tflite",))
        return
    ctx.snapshot()
    ctx.started()
    if action == "float":
        g = intq.load(str(path), input_shapes=seed.shapes)
        out = intq.Interpreter(g).run(seed.data[0])
        ctx.ran("intq ran the model in float")
        _onnx_oracle(ctx, path, seed.data[0], out)
        return
    qg = intq.quantize(str(path), seed.data[:2], input_shapes=seed.shapes)
    data = intq.export_tflite(qg)
    ctx.ran("intq quantized the model")
    feeds = seed.data[0]
    ordered = [feeds[n] for n in qg.inputs]
    for target in ("litert-ref", "tflite"):
        out = intq.Interpreter(qg, target=target).run(feeds)
        _tflite_oracle(ctx, data, ordered, [out[o] for o in qg.outputs], target)


def _onnx_oracle(ctx: Ctx, path: Path, feeds: dict, mine: dict) -> None:
    def ort_run():
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.log_severity_level = 4
        s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in s.get_outputs()]
        return dict(zip(names, s.run(None, {k: v for k, v in feeds.items()
                                            if k in {i.name for i in s.get_inputs()}})))

    status, value = in_grandchild(ort_run)
    ctx.info["oracle"] = status
    if status == "ok":
        _compare_close(mine, value, "float vs onnxruntime")
    elif status == "error":
        ctx.info["oracle_error"] = value[:160]


# -------------------------------------------------------------------------------- families


def fam_onnx_struct(ctx: Ctx) -> None:
    seed = ctx.pick(ctx.corpus.onnx)
    model = onnx.ModelProto()
    model.CopyFrom(seed.model)
    ctx.what.append(seed.name)
    ctx.what += mutate_onnx.mutate(model, ctx.rng, 1 if ctx.rng.random() < 0.8 else 2)
    run_onnx(ctx, model, seed)


def fam_tflite_struct(ctx: Ctx) -> None:
    seed = ctx.pick(ctx.corpus.tflite)
    data, what = mutate_tflite.mutate(seed.data, ctx.rng, 1 if ctx.rng.random() < 0.8 else 2)
    ctx.what += [seed.name, *what]
    if ctx.rng.random() < 0.2:
        (ctx.work / "model.tflite").write_bytes(data)
        cmd = ctx.pick([["run", "model.tflite", "--input", "x.npz", "-o", "y.npz"], ["inspect", "model.tflite"],
                        ["diff", "model.tflite", "--data", "x.npz", "--limit", "1"]])
        _save_inputs_for(ctx, data)
        ctx.what.append(f"cli {cmd[0]}")
        run_cli(ctx, cmd, outputs=("y.npz",))
        return
    run_tflite(ctx, data)


def _save_inputs_for(ctx: Ctx, data: bytes) -> None:
    """x.npz with random inputs of the model's declared input shapes (read from the file directly)."""
    from ai_edge_litert import schema_py_generated as schema

    from intq.tflite.schema import TENSOR_TYPE_DTYPES

    arrays = {}
    with contextlib.suppress(Exception):
        m = schema.ModelT.InitFromPackedBuf(data, 0)
        sub = m.subgraphs[0]
        for i in sub.inputs:
            t = sub.tensors[int(i)]
            dtype = TENSOR_TYPE_DTYPES.get(t.type, np.float32)
            shape = [max(int(d), 1) for d in (t.shape if t.shape is not None else [])]
            if int(np.prod(shape)) > 1 << 20:
                shape = [1]
            arrays[(t.name or b"x").decode("utf-8", "replace")] = (ctx.rng.standard_normal(shape) * 3).astype(dtype)
    np.savez(ctx.work / "x.npz", **(arrays or {"x": np.zeros(1, np.float32)}))


def fam_bytes_onnx(ctx: Ctx) -> None:
    seed = ctx.pick(ctx.corpus.onnx)
    other = ctx.pick(ctx.corpus.onnx).bytes
    data, what = mutate_bytes.mutate(seed.bytes, ctx.rng, other)
    ctx.what += [seed.name, *what]
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:
        model = None
    if model is None or ctx.rng.random() < 0.3:  # the raw bytes, through the command line or the API
        (ctx.work / "model.onnx").write_bytes(data)
        ctx.snapshot()
        ctx.started()
        import intq

        g = intq.load(str(ctx.work / "model.onnx"), input_shapes=seed.shapes)
        intq.Interpreter(g).run(seed.data[0])
        ctx.ran("intq ran the damaged model")
        return
    run_onnx(ctx, model, seed)


def fam_bytes_tflite(ctx: Ctx) -> None:
    seed = ctx.pick(ctx.corpus.tflite)
    data, what = mutate_bytes.mutate(seed.data, ctx.rng, ctx.pick(ctx.corpus.tflite).data)
    ctx.what += [seed.name, *what]
    run_tflite(ctx, data)


# ---------------------------------------------------------------- malformed-model generators

def _graph(nodes, inputs, outputs, inits=(), opset=17):
    from onnx import helper

    m = helper.make_model(helper.make_graph(nodes, "malformed", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _huge_shape_model(ctx: Ctx):
    """A float op whose output, computed from small inputs, is enormous."""
    from onnx import TensorProto, helper, numpy_helper

    big = ctx.pick([2**20, 2**24, 2**31, 10**6])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    kind = ctx.pick(["Expand", "ConstantOfShape", "Tile", "Range", "Resize", "Pad", "MatMul", "Add", "ConvTranspose",
                     "Reshape", "Upsample"])
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    if kind == "Expand":
        nodes, inits = [helper.make_node("Expand", ["x", "s"], ["y"])], [c("s", np.int64([big, big, 4]))]
    elif kind == "ConstantOfShape":
        nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])]
        inits = [c("s", np.int64([big, big]))]
    elif kind == "Tile":
        nodes, inits = [helper.make_node("Tile", ["x", "r"], ["y"])], [c("r", np.int64([big, big]))]
    elif kind == "Range":
        nodes = [helper.make_node("Range", ["a", "b", "d"], ["r"]), helper.make_node("Cast", ["r"], ["rf"], to=1),
                 helper.make_node("ReduceSum", ["rf"], ["s"], keepdims=1), helper.make_node("Add", ["x", "s"], ["y"])]
        inits = [c("a", np.float32(0)), c("b", np.float32(float(big) * big)), c("d", np.float32(1))]
    elif kind == "Resize":
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
        nodes = [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest")]
        inits = [c("sc", np.float32([1, 1, min(big, 2**20), min(big, 2**20)]))]
    elif kind == "Upsample":
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
        nodes = [helper.make_node("Upsample", ["x", "sc"], ["y"], mode="nearest")]
        inits = [c("sc", np.float32([1, 1, 2**16, 2**16]))]
        return _graph(nodes, [x], [y], inits, opset=9), f"huge {kind}"
    elif kind == "Pad":
        nodes, inits = [helper.make_node("Pad", ["x", "p"], ["y"])], [c("p", np.int64([0, 0, big, big]))]
    elif kind == "MatMul":
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**16, 1])
        nodes, inits = [helper.make_node("MatMul", ["x", "w"], ["y"])], [c("w", np.ones((1, 2**16), np.float32))]
    elif kind == "Add":
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**16, 1])
        nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), helper.make_node("Add", ["x", "t"], ["y"])]
        inits = []
    elif kind == "ConvTranspose":
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
        nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2**14, 2**14], kernel_shape=[1, 1])]
        inits = [c("w", np.ones((1, 1, 1, 1), np.float32))]
    else:  # Reshape to a shape the data cannot fill, with a huge dim
        nodes, inits = [helper.make_node("Reshape", ["x", "s"], ["y"])], [c("s", np.int64([big, -1]))]
    return _graph(nodes, [x], [y], inits), f"huge {kind}"


def fam_malformed(ctx: Ctx) -> None:
    """Hand-made broken models and files, each with what intq must do."""
    import intq
    from onnx import TensorProto, helper, numpy_helper

    gen = ctx.pick(["no_outputs", "complex_input", "huge_output", "huge_output", "huge_output", "tflite_declared_shape",
                    "tflite_huge_dims", "raw_data_length", "external_outside", "external_inside", "external_short",
                    "attr_wrong_type", "cycle", "input_huge_dim", "string_input", "not_a_model", "output_is_input",
                    "onnx_declared_shape", "quantize_huge_output", "zero_dim_input", "bool_input_quantize",
                    # issue 27 item 6: the classes a campaign on main 174be28 still found
                    "zero_dim_weight", "huge_pad_reduction", "non_utf8_name"])
    ctx.what.append(gen)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    feeds = {"x": ctx.rng.standard_normal((1, 4)).astype(np.float32)}
    if gen == "no_outputs":
        m = _graph([helper.make_node("Relu", ["x"], ["y"])], [x], [])
        ctx.refuse_because("a graph with no outputs")
        action = ctx.pick(["load", "quantize", "cli"])
    elif gen == "complex_input":
        xc = helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [1, 4])
        m = _graph([helper.make_node("Identity", ["x"], ["y"])], [xc], [y])
        feeds = {"x": (ctx.rng.standard_normal((1, 4)) + 1j).astype(np.complex64)}
        ctx.refuse_because("a complex-valued input")
        action = ctx.pick(["load", "quantize"])
    elif gen == "string_input":
        xs = helper.make_tensor_value_info("x", TensorProto.STRING, [1, 4])
        m = _graph([helper.make_node("Identity", ["x"], ["y"])], [xs], [y])
        feeds = {"x": np.array([["a", "b", "c", "d"]], dtype=object)}
        ctx.refuse_because("a string input")
        action = "load"
    elif gen == "bool_input_quantize":
        xb = helper.make_tensor_value_info("x", TensorProto.BOOL, [1, 4])
        m = _graph([helper.make_node("Cast", ["x"], ["c"], to=1), helper.make_node("Relu", ["c"], ["y"])], [xb], [y])
        feeds = {"x": ctx.rng.integers(0, 2, (1, 4)).astype(bool)}
        action = "quantize"
    elif gen in ("huge_output", "quantize_huge_output"):
        m, what = _huge_shape_model(ctx)
        ctx.what.append(what)
        feeds = {"x": np.ones(tuple(d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim), np.float32)}
        ctx.refuse_because("a tensor over the size limit")
        action = "quantize" if gen == "quantize_huge_output" else ctx.pick(["load", "load", "cli"])
    elif gen == "raw_data_length":
        w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
        w.raw_data = w.raw_data[: int(ctx.rng.integers(0, 63))] if ctx.rng.random() < 0.7 else w.raw_data + b"\0" * 4
        m = _graph([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [w])
        ctx.refuse_because("initializer bytes that do not match its dims")
        action = ctx.pick(["load", "quantize", "cli"])
    elif gen in ("external_outside", "external_inside", "external_short"):
        w = numpy_helper.from_array(ctx.rng.standard_normal((4, 4)).astype(np.float32), "w")
        raw = w.raw_data
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        if gen == "external_outside":
            loc = ctx.pick(["../outside.bin", "/etc/hostname", "../../etc/passwd",
                            str(ctx.work.parent / "outside.bin")])
            ctx.refuse_because(f"external data outside the model's folder: {loc}")
        elif gen == "external_short":
            loc = "weights.bin"
            (ctx.work / loc).write_bytes(raw[:17])
            ctx.refuse_because("external data shorter than the tensor")
        else:
            loc = "weights.bin"
            (ctx.work / loc).write_bytes(raw)
        w.external_data.add(key="location", value=loc)
        m = _graph([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [w])
        action = ctx.pick(["load", "quantize"])
    elif gen == "attr_wrong_type":
        xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])
        op = ctx.pick(["Conv", "MaxPool", "AveragePool"])
        attr = ctx.pick(["strides", "kernel_shape", "pads", "dilations", "group", "auto_pad", "ceil_mode"])
        value = ctx.pick([2.5, b"2", [1.5, 1.5], numpy_helper.from_array(np.int64([1, 1])), [1, 1, 1], -1])
        node = helper.make_node(op, ["x", "w"] if op == "Conv" else ["x"], ["y"])
        attrs = {"kernel_shape": [3, 3], attr: value}
        node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
        m = _graph([node], [xi], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")] if op == "Conv" else [])
        feeds = {"x": ctx.rng.standard_normal((1, 1, 6, 6)).astype(np.float32)}
        ctx.what.append(f"{op}.{attr} = {value!r}"[:80])
        action = ctx.pick(["load", "quantize", "quantize"])
    elif gen == "cycle":
        m = _graph([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                    helper.make_node("Identity", ["a"], ["y"])], [x], [y])
        ctx.refuse_because("a cycle")
        action = "load"
    elif gen == "input_huge_dim":
        xh = helper.make_tensor_value_info("x", TensorProto.FLOAT, [ctx.pick([2**31, 2**40, 2**20]), 2**20])
        m = _graph([helper.make_node("Relu", ["x"], ["y"])], [xh], [y])
        ctx.refuse_because("an input over the size limit")
        action = ctx.pick(["load", "quantize", "cli"])
    elif gen == "zero_dim_input":
        xz = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 0])
        m = _graph([helper.make_node("Relu", ["x"], ["y"])], [xz], [helper.make_tensor_value_info("y", 1, None)])
        feeds = {"x": np.zeros((1, 0), np.float32)}
        action = ctx.pick(["load", "quantize"])
    elif gen == "zero_dim_weight":  # numpy's reshape error escaped from the weight scales
        if ctx.pick([True, False]):
            w = numpy_helper.from_array(np.zeros((4, 0), np.float32), "w")
            m = _graph([helper.make_node("MatMul", ["x", "w"], ["y"])], [x],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 0])], [w])
        else:
            xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
            w = numpy_helper.from_array(np.zeros((0, 1, 3, 3), np.float32), "w")
            m = _graph([helper.make_node("Conv", ["x", "w"], ["y"])], [xi],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
            feeds = {"x": ctx.rng.standard_normal((1, 1, 8, 8)).astype(np.float32)}
        ctx.refuse_because("a weight with a zero-sized dimension")
        action = ctx.pick(["quantize", "cli"])
    elif gen == "huge_pad_reduction":  # refused by the MEAN kernel only after minutes of calibration
        xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
        pad = int(ctx.pick([1500, 2000]))  # 9-16 M elements: under the fuzz size limit, over the accumulator bound
        w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
        m = _graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[pad] * 4),
                    helper.make_node("ReduceMean", ["c"], ["y"], axes=[2, 3], keepdims=1)], [xi],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
        feeds = {"x": ctx.rng.standard_normal((1, 1, 8, 8)).astype(np.float32)}
        ctx.refuse_because("a reduction whose element count overflows the int32 accumulator")
        action = ctx.pick(["quantize", "cli"])
    elif gen == "non_utf8_name":  # a UnicodeDecodeError escaped from onnx.helper
        m = _graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Relu", ["r"], ["y"])], [x], [y])
        raw = m.SerializeToString().replace(b"\x01r", b"\x01\xff")  # the 1-byte name "r" as an invalid byte
        path = ctx.work / "model.onnx"
        path.write_bytes(raw)
        ctx.what.append("cli")
        np.savez(ctx.work / "calib.npz", x=np.repeat(feeds["x"], 2, axis=0))
        run_cli(ctx, ["quantize", "model.onnx", "--calib", "calib.npz", "-o", "out.tflite", "--check-samples", "1"],
                outputs=("out.tflite",))
        return
    elif gen == "output_is_input":
        m = _graph([], [x], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])])
        action = ctx.pick(["load", "quantize"])
    elif gen == "onnx_declared_shape":
        m = _graph([helper.make_node("Relu", ["x"], ["y"])], [x],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ctx.pick([2, 3, 7]), 4])])
        ctx.refuse_because("a declared output shape its operators do not compute")
        action = ctx.pick(["load", "quantize"])
    elif gen == "not_a_model":
        target = ctx.pick(["model.onnx", "model.tflite"])
        kind = ctx.pick(["empty", "text", "dir", "other_format", "zip"])
        if kind == "empty":
            (ctx.work / target).write_bytes(b"")
        elif kind == "text":
            (ctx.work / target).write_text("not a model\n")
        elif kind == "dir":
            (ctx.work / target).mkdir()
        elif kind == "zip":
            with zipfile.ZipFile(ctx.work / target, "w") as z:
                z.writestr("a.npy", b"x")
        else:
            (ctx.work / target).write_bytes(ctx.corpus.tflite[0].data if target.endswith("onnx")
                                            else ctx.corpus.onnx[0].bytes)
        ctx.what.append(f"{target} {kind}")
        ctx.snapshot()
        ctx.started()
        intq.load(str(ctx.work / target))
        ctx.ran("loaded a file that is not a model")
        raise Verdict("silently_wrong", "loaded a file that is not a model", "not a model accepted")
    elif gen == "tflite_declared_shape":
        m_ = mutate_tflite.unpack(ctx.pick(ctx.corpus.tflite).data)
        sub = m_.subgraphs[0]
        o = int(sub.outputs[0])
        shape = [int(d) for d in sub.tensors[o].shape]
        shape[-1] += int(ctx.rng.integers(1, 4))
        sub.tensors[o].shape = np.array(shape, np.int32)
        sub.tensors[o].shapeSignature = None
        ctx.refuse_because("a declared output shape its operators do not compute")
        run_tflite(ctx, mutate_tflite.pack(m_))
        return
    elif gen == "tflite_huge_dims":
        m_ = mutate_tflite.unpack(ctx.pick(ctx.corpus.tflite).data)
        sub = m_.subgraphs[0]
        i = int(ctx.rng.integers(len(sub.tensors)))
        shape = [int(d) for d in (sub.tensors[i].shape if sub.tensors[i].shape is not None else [1])] or [1]
        shape[0] = ctx.pick([2**31 - 1, 2**30, 2**28])
        sub.tensors[i].shape = np.array(shape, np.int32)
        sub.tensors[i].shapeSignature = None
        ctx.refuse_because("a tensor over the size limit")
        run_tflite(ctx, mutate_tflite.pack(m_))
        return
    else:
        raise AssertionError(gen)
    path = _write_onnx(ctx, m)
    ctx.what.append(action)
    if action == "cli":
        np.savez(ctx.work / "calib.npz", **{k: np.repeat(v, 2, axis=0) for k, v in feeds.items()})
        run_cli(ctx, ["quantize", "model.onnx", "--calib", "calib.npz", "-o", "out.tflite", "--check-samples", "1"],
                outputs=("out.tflite",))
        return
    ctx.snapshot()
    ctx.started()
    if action == "load":
        g = intq.load(str(path))
        intq.Interpreter(g).run(feeds)
        ctx.ran("intq ran it")
    else:
        qg = intq.quantize(str(path), [feeds, feeds])
        intq.Interpreter(qg).run(feeds)
        ctx.ran("intq quantized and ran it")


# ------------------------------------------------------------------------------- bad data


def _bad_array(ctx: Ctx, shape: tuple[int, ...]):
    """(array or None, description, must_refuse) for calibration / run data."""
    kind = ctx.pick(["nan", "inf", "complex", "object", "str", "bool", "int8", "float64", "wrong_shape", "empty",
                     "zero_d", "big_endian", "fortran", "structured", "huge_values", "float16", "ok"])
    x = ctx.rng.standard_normal((2, *shape[1:])).astype(np.float32)
    refuse = kind in ("nan", "inf", "complex", "object", "str", "wrong_shape", "empty", "zero_d", "structured")
    if kind == "nan":
        x.reshape(-1)[0] = np.nan
    elif kind == "inf":
        x.reshape(-1)[-1] = -np.inf
    elif kind == "complex":
        x = x + 1j * x
    elif kind == "object":
        x = x.astype(object)
    elif kind == "str":
        x = x.astype(str)
    elif kind == "bool":
        x = x > 0
    elif kind == "int8":
        x = (x * 10).astype(np.int8)
    elif kind == "float64":
        x = x.astype(np.float64)
    elif kind == "wrong_shape":
        x = x.reshape(-1)[: max(x.size - 1, 1)]
    elif kind == "empty":
        x = np.zeros((0, *shape[1:]), np.float32)
    elif kind == "zero_d":
        x = np.float32(1.0)
    elif kind == "big_endian":
        x = x.astype(">f4")
    elif kind == "fortran":
        x = np.asfortranarray(x)
    elif kind == "structured":
        x = np.zeros(2, dtype=[("a", "f4"), ("b", "i4")])
    elif kind == "huge_values":
        x = x * np.float32(3e38)
    elif kind == "float16":
        x = x.astype(np.float16)
    return x, kind, refuse


def _bad_file(ctx: Ctx, name: str, key: str, shape) -> tuple[str, bool]:
    """Write a broken data file ``name`` (for --calib / --data / --input); (description, must_refuse)."""
    path = ctx.work / name
    kind = ctx.pick(["array", "array", "array", "truncated_npz", "not_zip", "zip_junk", "huge_header", "empty_file",
                     "pickle", "dir_named_npz", "wrong_key", "extra_key", "images_bad", "images_ok", "empty_dir",
                     "symlink_loop", "npy_for_npz", "header_cut"])
    if kind == "array":
        x, what, refuse = _bad_array(ctx, shape)
        if isinstance(x, np.ndarray) and x.dtype == object:
            _save_pickled(path, key, x)
        else:
            np.savez(path, **{key: x})
        return f"array {what}", refuse
    if kind == "truncated_npz":
        np.savez(path, **{key: ctx.rng.standard_normal(shape).astype(np.float32)})
        data = path.read_bytes()
        path.write_bytes(data[: int(ctx.rng.integers(0, len(data)))])
        return kind, True
    if kind == "not_zip":
        path.write_bytes(bytes(ctx.rng.integers(0, 256, 200, dtype=np.uint8)))
        return kind, True
    if kind == "zip_junk":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(f"{key}.npy", b"\x93NUMPY garbage")
        return kind, True
    if kind == "huge_header":
        header = {"descr": "<f4", "fortran_order": False, "shape": (2**20, 2**20, 2**10)}
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, header)
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(f"{key}.npy", buf.getvalue() + b"\0" * 64)
        return kind, True
    if kind == "empty_file":
        path.write_bytes(b"")
        return kind, True
    if kind == "header_cut":  # an .npy header dict cut mid-way (numpy's parser: tokenize's TokenError; issue 27)
        text = b"{'descr': '<f4', 'fortran_order': Fa"
        header = b"\x93NUMPY\x01\x00" + len(text + b"\n").to_bytes(2, "little") + text + b"\n"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(f"{key}.npy", header + bytes(16))
        return kind, True
    if kind == "pickle":
        _save_pickled(path, key, np.array([{"a": 1}], dtype=object))
        return kind, True
    if kind == "dir_named_npz":
        path.mkdir()
        return kind, True
    if kind == "wrong_key":
        np.savez(path, **{"not_" + key: ctx.rng.standard_normal(shape).astype(np.float32),
                          "other": np.zeros(1, np.float32)})
        return kind, True
    if kind == "extra_key":
        np.savez(path, **{key: ctx.rng.standard_normal(shape).astype(np.float32), "extra": np.zeros(3, np.float32)})
        return kind, True
    if kind == "npy_for_npz":
        np.save(ctx.work / "data.npy", ctx.rng.standard_normal(shape).astype(np.float32))
        os.replace(ctx.work / "data.npy", path)
        return kind, False
    # folders
    folder = ctx.work / "imgs"
    folder.mkdir(exist_ok=True)
    if kind == "images_bad":
        for i in range(3):
            (folder / f"{i}.png").write_bytes(ctx.pick([b"", b"\x89PNG\r\n\x1a\n garbage", bytes(50)]))
        return f"{kind} (in imgs/)", True
    if kind == "images_ok":
        from PIL import Image

        for i in range(2):
            mode = ctx.pick(["RGB", "L", "RGBA", "I;16", "CMYK", "P", "1"])
            size = (int(ctx.rng.integers(1, 40)), int(ctx.rng.integers(1, 40)))
            Image.new(mode, size).save(folder / f"{i}.png" if mode != "CMYK" else folder / f"{i}.jpg")
        return f"{kind} (in imgs/)", False
    if kind == "symlink_loop":
        os.symlink(folder / "loop", folder / "loop")
        os.symlink("loop2.npy", folder / "loop2.npy")
        return f"{kind} (in imgs/)", True
    return "empty_dir (imgs/)", True


def _save_pickled(path: Path, key: str, x: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, x, allow_pickle=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{key}.npy", buf.getvalue())


def fam_bad_data(ctx: Ctx) -> None:
    """Calibration / evaluation / run data that is broken, through the API and the command line."""
    import intq

    seed = ctx.pick([s for s in ctx.corpus.onnx if s.name in CONVERTIBLE and len(s.shapes) == 1])
    key, shape = next(iter(seed.shapes.items()))
    (ctx.work / "model.onnx").write_bytes(seed.bytes)
    what, refuse = _bad_file(ctx, "data.npz", key, shape)
    src = "imgs" if "imgs/" in what else "data.npz"
    ctx.what += [seed.name, what]
    if refuse:
        ctx.refuse_because(f"data: {what}")
    shape_arg = ["--input-shape", f"{key}={'x'.join(map(str, shape))}"]
    mode = ctx.pick(["api_calibrate", "cli_quantize", "cli_eval", "cli_run"] + (["api_iter"] if src != "imgs" else []))
    ctx.what.append(mode)
    if mode == "cli_quantize":
        size = ["--size", str(shape[2]), str(shape[3])] if src == "imgs" and len(shape) == 4 else []
        run_cli(ctx, ["quantize", "model.onnx", "--calib", src, *shape_arg, *size, "-o", "q.tflite",
                      "--check-samples", "1"], outputs=("q.tflite",))
        return
    if mode == "cli_eval":
        labels = ctx.pick(["labels.npy", "labels.txt", None])
        extra = []
        if labels == "labels.npy":
            np.save(ctx.work / labels, ctx.pick([np.array([1, 2]), np.array([1.5, 2.5]), np.array([-1, 10**12]),
                                                 np.array(["a", "b"]), np.zeros((2, 2), np.int64)]))
            extra = ["--labels", labels]
        elif labels == "labels.txt":
            (ctx.work / labels).write_text(ctx.pick(["1\n2\n", "a\nb\n", "", "1,2,3", "\xff\n", "9" * 400]))
            extra = ["--labels", labels]
        ctx.what.append(f"labels {labels}")
        (ctx.work / "calib.npz").write_bytes(b"")
        np.savez(ctx.work / "calib.npz", **{key: np.concatenate([d[key] for d in seed.data])})
        run_cli(ctx, ["eval", "model.onnx", "--calib", "calib.npz", "--data", src, *shape_arg, *extra, "--limit", "2"])
        return
    if mode == "cli_run":
        if src == "imgs":
            raise Verdict("ok", "run takes no image folders")
        g = intq.quantize(seed.model, seed.data[:2], input_shapes=seed.shapes)
        (ctx.work / "q.tflite").write_bytes(intq.export_tflite(g))
        run_cli(ctx, ["run", "q.tflite", "--input", "data.npz", "-o", "y.npz"], outputs=("y.npz",))
        return
    g = intq.load(seed.model, input_shapes=seed.shapes)
    ctx.snapshot()
    ctx.started()
    if mode == "api_iter":
        x, kind, refuse2 = _bad_array(ctx, shape)
        ctx.what.append(f"in memory {kind}")
        ctx.expect_refusal = f"data: {kind}" if refuse2 else None
        intq.calibrate(g, [x] if ctx.rng.random() < 0.5 else [{key: x}])
    else:
        intq.calibrate(g, str(ctx.work / src))
    ctx.ran("calibrated")


# -------------------------------------------------------------------------- CLI misuse


def fam_cli_misuse(ctx: Ctx) -> None:
    """Command lines a user gets wrong: bad values, missing files, outputs colliding with inputs or
    each other, files in the way (including names older versions used for temporaries)."""
    seed = ctx.pick([s for s in ctx.corpus.onnx if s.name == "digits_cnn"] or ctx.corpus.onnx)
    key, shape = next(iter(seed.shapes.items()))
    (ctx.work / "model.onnx").write_bytes(seed.bytes)
    np.savez(ctx.work / "calib.npz", **{key: np.concatenate([d[key] for d in seed.data])})
    np.save(ctx.work / "x.npy", seed.data[0][key])
    q = next(s for s in ctx.corpus.tflite if s.name == "intq_convnet")
    (ctx.work / "q.tflite").write_bytes(next((s.data for s in ctx.corpus.tflite if s.name == "intq_" + seed.name),
                                             q.data))
    for name in ctx.rng.choice(["out.tflite.tmp", "json.tmp", "ranges.json.tmp", "out.tflite", "ranges.json", "y.npy",
                                "y.npz", "noext.npz", "report.html", ".out.tflite.x.intq-tmp"],
                               int(ctx.rng.integers(0, 4)), replace=False):
        (ctx.work / str(name)).write_text("the user's file")
    shp = f"{key}={'x'.join(map(str, shape))}"
    outputs = ["out.tflite", "ranges.json", "calib.npz", "model.onnx", "q.tflite", "x.npy", "./out.tflite",
               "sub/../out.tflite", "sub/out.tflite", "noext", "y.npy", "y.npz", "report.html", ".", "calib.npz/x",
               "ranges.json.tmp"]
    sub = ctx.pick(["quantize", "quantize", "run", "compare", "eval", "inspect", "diff", "demo", "bogus"])
    argv = [sub]
    outs = []
    if sub == "quantize":
        o, t = ctx.pick(outputs), ctx.pick(outputs + [None, None])
        argv += [ctx.pick(["model.onnx", "model.onnx", "missing.onnx", "q.tflite", "calib.npz"]), "--calib",
                 ctx.pick(["calib.npz", "calib.npz", "x.npy", "missing.npz", "model.onnx", "."]), "-o", o,
                 "--check-samples", ctx.pick(["0", "1", "-1", "x", "100000000"])]
        outs = [o]
        if t:
            argv += ["--calib-table", t]
            outs.append(t)
        if ctx.rng.random() < 0.8:
            argv += ["--input-shape", ctx.pick([shp, shp, "image=1x1x8", "x=1", "=1x1", "image=1xax8x8", "image=",
                                                f"{key}=1x1x8x8x1", f"{key}=0x1x8x8", f"{key}=1x1x99999x99999"])]
    elif sub == "run":
        o = ctx.pick(outputs + [None])
        argv += [ctx.pick(["q.tflite", "q.tflite", "model.onnx", "missing.tflite", "calib.npz"]), "--input",
                 ctx.pick(["x.npy", "x.npy", "calib.npz", "missing.npy", "model.onnx", "."])]
        if o:
            argv += ["-o", o]
            outs = [o]
        argv += ctx.pick([[], ["--target", ctx.pick(["tflite", "litert-ref", "xnnpack", "bogus", ""])]])
    elif sub in ("compare", "eval"):
        argv += ["model.onnx", ctx.pick(["q.tflite", "model.onnx", "calib.npz", "missing.tflite"]), "--data",
                 ctx.pick(["calib.npz", "x.npy", "missing", "."]), "--input-shape", shp]
        argv += ctx.pick([[], ["--limit", ctx.pick(["0", "-3", "1", "x"])],
                          ["--labels", ctx.pick(["x.npy", "calib.npz"])],
                          ["--top", ctx.pick(["-1", "0", "3"])]]) if sub == "eval" else []
        if sub == "compare" and ctx.rng.random() < 0.6:
            h = ctx.pick(outputs)
            argv += ["--html", h]
            outs = [h]
    elif sub == "inspect":
        argv += [ctx.pick(["q.tflite", "model.onnx", "calib.npz", "missing.onnx", "."])]
        argv += ctx.pick([[], ["--input-shape", shp], ["--target", ctx.pick(["tflite", "nope"])]])
    elif sub == "diff":
        argv += ["q.tflite", "--targets", ctx.pick(["tflite,litert-ref", "tflite", "a,b", "tflite,tflite,tflite",
                                                    ",", "xnnpack,litert-opt"]),
                 "--data", ctx.pick(["calib.npz", "missing", "x.npy"]), "--limit", ctx.pick(["1", "0", "2"])]
    elif sub == "demo":
        o = ctx.pick(outputs)
        argv += ["-o", o]
        outs = [o]
        raise Verdict("ok", "demo is exercised by tests/test_cli.py (too slow here)")
    extra = ctx.pick([[], [], ["--force"], ["--json"],
                      ["--size", ctx.pick(["-1", "0", "8"]), ctx.pick(["8", "100000"])],
                      ["--std", ctx.pick(["inf", "nan", "0", "-1", "0.2"])],
                      ["--mean", ctx.pick(["nan", "0.5", "1e400"])],
                      ["--layout", ctx.pick(["NCHW", "NHWC", "CHW"])], ["--method", ctx.pick(["minmax", "kl", ""])],
                      ["--max-tensor-size", ctx.pick(["1", "0", "1k", "abc"])], ["--debug"]])
    argv += extra
    force = "--force" in argv
    ctx.what.append("intq " + " ".join(argv))
    # the rules intq must enforce on these paths (a silent acceptance of any is a defect)
    inputs = {a for a in argv[1:] if (ctx.work / a).exists() and a not in outs}
    real = lambda p: os.path.realpath(ctx.work / p)  # noqa: E731
    resolved = [real(o) for o in outs]
    if any(r in {real(i) for i in inputs} for r in resolved) or len(set(resolved)) < len(resolved):
        ctx.refuse_because("an output that is an input or another output")
    if any((ctx.work / o).exists() for o in outs) and not force:
        ctx.refuse_because("an existing output without --force")
    if sub == "run" and outs and not outs[0].lower().endswith((".npy", ".npz")):
        ctx.refuse_because("run -o without .npy/.npz")
    if any(v in argv for v in ("inf", "nan", "1e400")) or any(a in argv for a in ("-1", "-3")):
        ctx.refuse_because("a non-finite or negative value")
    run_cli(ctx, argv, outputs=tuple(outs), force=force)


# ----------------------------------------------------------------------- API misuse


def fam_api_misuse(ctx: Ctx) -> None:
    """The Python API called wrongly: objects of the wrong type, inputs of the wrong dtype / shape /
    values, targets that do not exist."""
    import intq

    seed = ctx.pick([s for s in ctx.corpus.tflite if s.origin == "intq"])
    g = intq.load(seed.data)
    feeds = _random_inputs(g, ctx.rng)
    name = g.inputs[0]
    case = ctx.pick(["interpreter_arg", "target", "run_arg", "dtype", "shape", "values", "load_arg", "quantize_arg",
                     "export_arg", "calibrate_arg"])
    ctx.what += [seed.name, case]
    ctx.snapshot()
    ctx.started()
    must = True
    if case == "interpreter_arg":
        intq.Interpreter(ctx.pick(["not a graph", None, 3, b"TFL3", seed.data, {"nodes": []}]))
    elif case == "target":
        intq.Interpreter(g, target=ctx.pick(["bogus", None, 3, "", "TFLITE", ["tflite"]]))
    elif case == "run_arg":
        intq.Interpreter(g).run(ctx.pick([None, [], [feeds[name]], "x", {name: None}, {}, {name: feeds[name], "z": 1}]))
    elif case == "dtype":
        x = feeds[name]
        bad = ctx.pick([x.astype(np.complex64), x.astype(object), x.astype(str), x.astype(bool), x.astype(np.float64),
                        x.astype(np.int32), x.astype(np.uint8)])
        want = np.dtype(g.tensors[name].dtype)
        must = bad.dtype.kind in "OUcSb" or (want.kind in "iu" and bad.dtype != want)
        ctx.what.append(str(bad.dtype))
        intq.Interpreter(g).run({name: bad})
    elif case == "shape":
        x = feeds[name]
        intq.Interpreter(g).run({name: ctx.pick([x[None], x.reshape(-1), np.zeros((0,), x.dtype), x[..., :1],
                                                 np.zeros((), x.dtype)])})
    elif case == "values":
        x = feeds[name].astype(np.float32)
        x.reshape(-1)[0] = ctx.pick([np.nan, np.inf, -np.inf])
        must = True
        intq.Interpreter(g).run({name: x if np.dtype(g.tensors[name].dtype).kind == "f" else x})
    elif case == "load_arg":
        intq.load(ctx.pick([3, None, b"", b"garbage", str(ctx.work), "missing.onnx", "model.txt", ["a"],
                            bytearray(b"TFL3")]))
    elif case == "quantize_arg":
        onnx_seed = ctx.pick([s for s in ctx.corpus.onnx if s.name in CONVERTIBLE])
        bad = ctx.pick([None, 3, [], [None], "missing.npz", [np.zeros(3)], [{"nope": np.zeros(3)}]])
        intq.quantize(onnx_seed.model, bad, input_shapes=onnx_seed.shapes)
    elif case == "export_arg":
        onnx_seed = ctx.pick(ctx.corpus.onnx)
        fg = intq.load(onnx_seed.model, input_shapes=onnx_seed.shapes)
        intq.export_tflite(ctx.pick([fg, "graph", None]))
    else:
        onnx_seed = ctx.pick(ctx.corpus.onnx)
        fg = intq.load(onnx_seed.model, input_shapes=onnx_seed.shapes)
        intq.calibrate(fg, onnx_seed.data[:1], method=ctx.pick(["bogus", "percentile", None, 3]),
                       **ctx.pick([{}, {"percentile": 120.0}, {"percentile": float("nan")}, {"bins": -1}]))
        must = False
    if must:
        ctx.refuse_because(f"API misuse: {case}")
    ctx.ran()


# ------------------------------------------------------------------------------ interrupts


def fam_interrupt(ctx: Ctx) -> None:
    """Ctrl-C (or SIGTERM) at a random moment of a command that writes files: exit 130/143 with
    nothing written and every existing file kept, or (signal too late) a complete success."""
    seed = next(s for s in ctx.corpus.onnx if s.name == "digits_cnn")
    key, shape = next(iter(seed.shapes.items()))
    (ctx.work / "model.onnx").write_bytes(seed.bytes)
    np.savez(ctx.work / "calib.npz", **{key: np.concatenate([d[key] for d in seed.data] * 4)})
    q = next(s for s in ctx.corpus.tflite if s.name == "intq_digits_cnn").data
    (ctx.work / "q.tflite").write_bytes(q)
    np.save(ctx.work / "x.npy", seed.data[0][key])
    force = ctx.rng.random() < 0.5
    if force:
        for name in ("out.tflite", "ranges.json", "report.html", "y.npz"):
            (ctx.work / name).write_text("the user's previous file")
    shp = ["--input-shape", f"{key}={'x'.join(map(str, shape))}"]
    cmd = ctx.pick([
        (["quantize", "model.onnx", "--calib", "calib.npz", *shp, "-o", "out.tflite", "--calib-table", "ranges.json",
          "--check-samples", "4"], ("out.tflite", "ranges.json")),
        (["compare", "model.onnx", "q.tflite", "--data", "calib.npz", *shp, "--html", "report.html"], ("report.html",)),
        (["run", "q.tflite", "--input", "x.npy", "-o", "y.npz"], ("y.npz",)),
        (["eval", "model.onnx", "q.tflite", "--data", "calib.npz", *shp], ()),
    ])
    argv = cmd[0] + (["--force"] if force else [])
    ctx.what.append("intq " + " ".join(argv))
    code = run_cli(ctx, argv, outputs=cmd[1], force=force, interrupted_ok=True)
    ctx.info["finished_before_the_signal"] = code == 0


# ------------------------------------------------------------------- self-test of the judge


def _selftest_model(ctx: Ctx) -> None:
    (ctx.work / "model.onnx").write_bytes(ctx.corpus.onnx[0].bytes)
    ctx.snapshot()
    ctx.started()


def fam_selftest_traceback(ctx: Ctx) -> None:
    _selftest_model(ctx)
    import intq

    intq.load(str(ctx.work / "model.onnx")).nodes[0].inputs["not an index"]  # a TypeError, as intq's bugs raise


def fam_selftest_hang(ctx: Ctx) -> None:
    _selftest_model(ctx)
    import time

    time.sleep(3600)


def fam_selftest_crash(ctx: Ctx) -> None:
    _selftest_model(ctx)
    os.kill(os.getpid(), signal.SIGSEGV)


def fam_selftest_memory(ctx: Ctx) -> None:
    _selftest_model(ctx)
    np.ones(1 << 40, np.uint8)  # beyond the address-space limit: MemoryError, a traceback


def fam_selftest_lost_file(ctx: Ctx) -> None:
    _selftest_model(ctx)
    (ctx.work / "model.onnx").write_bytes(b"overwritten")


def fam_selftest_silently_wrong(ctx: Ctx) -> None:
    _selftest_model(ctx)
    ctx.refuse_because("a case that must be refused")
    ctx.ran("but it ran")


#: families that end the way their name says: tests/fuzz/test_fuzz_sample.py checks the judge with them
SELFTEST = {"selftest_traceback": ("traceback", fam_selftest_traceback), "selftest_hang": ("hang", fam_selftest_hang),
            "selftest_crash": ("crash", fam_selftest_crash), "selftest_memory": ("traceback", fam_selftest_memory),
            "selftest_lost_file": ("lost_file", fam_selftest_lost_file),
            "selftest_silently_wrong": ("silently_wrong", fam_selftest_silently_wrong)}


# ------------------------------------------------------------------------------- the table

#: family -> (weight in a campaign, function)
FAMILIES = {
    "onnx_struct": (20, fam_onnx_struct),
    "tflite_struct": (20, fam_tflite_struct),
    "bytes_onnx": (6, fam_bytes_onnx),
    "bytes_tflite": (6, fam_bytes_tflite),
    "malformed": (14, fam_malformed),
    "bad_data": (10, fam_bad_data),
    "cli_misuse": (12, fam_cli_misuse),
    "api_misuse": (6, fam_api_misuse),
    "interrupt": (6, fam_interrupt),
    **{name: (0, fn) for name, (_, fn) in SELFTEST.items()},  # run only when asked (weight 0)
}
