"""Run fuzz cases in isolated, limited processes and classify how each ended.

Process layout (cheap enough for hundreds of cases a minute on two cores):

    orchestrator (no intq import) --stdin/stdout JSON lines--> J workers ("zygotes")
    worker: imports intq, onnx, LiteRT, TFLite Micro, builds the seed corpus and warms the
            compiled kernels ONCE, then per case forks a child
    child:  rlimits (address space, CPU seconds, file size, no core dumps), its own working
            folder, runs the case, sends one JSON verdict through a pipe, exits with os._exit

The worker enforces the wall-clock limit (SIGKILL to the child's process group: "hang") and
reads how the child ended: a verdict ("ok", "clean error", "traceback", "silently wrong",
"lost file"), or none because a signal killed it ("crash": segfault, abort, SIGXCPU...).
Interrupt cases get SIGINT or SIGTERM from the worker at the case's chosen moment, as a
user's Ctrl-C would arrive.

Outcome classes (:data:`OUTCOMES`): ``ok`` and ``clean`` are fine; every other class is a
defect to fix (issue 17's table).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: how a case can end, in report order; the first two are fine, the rest are defects
OUTCOMES = ("ok", "clean", "traceback", "hang", "crash", "silently_wrong", "lost_file")
DEFECTS = OUTCOMES[2:]


@dataclass
class Result:
    id: int
    family: str
    seed: int
    outcome: str
    detail: str = ""
    group: str = ""  # what identifies "the same defect" (exception type and place, mutation)
    seconds: float = 0.0
    info: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- orchestrator


def plan(cases: int, seed: int, families: dict[str, float], only: list[str] | None = None) -> list[dict]:
    """The case specs: family drawn by weight, one 63-bit seed each, from the master ``seed``."""
    import random

    rng = random.Random(seed)
    names = [f for f in families if not only or f in only]
    if not names:
        raise SystemExit(f"no fuzz family matches {only}; known: {sorted(families)}")
    weights = [families[f] for f in names]
    return [{"id": i, "family": rng.choices(names, weights)[0], "seed": rng.getrandbits(63)} for i in range(cases)]


class Worker:
    """One zygote process, fed case specs one at a time."""

    def __init__(self, options: dict, env: dict):
        self.options = options
        # a neutral folder: `python -m` puts the working folder first on sys.path, and intq must come
        # from PYTHONPATH (another checkout, with --intq-root)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.runner", "--worker", json.dumps(options)],
                                     cwd="/", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.busy: dict | None = None
        self.started = time.monotonic()
        line = self.proc.stdout.readline()  # "ready" once the corpus is built and warm
        if not line.startswith("ready"):
            raise RuntimeError(f"fuzz worker failed to start: {line!r}")
        self.ready_seconds = time.monotonic() - self.started

    def send(self, spec: dict) -> None:
        self.busy = spec
        self.proc.stdin.write(json.dumps(spec) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


def run_campaign(specs: list[dict], jobs: int, options: dict, progress=None, deadline: float | None = None) -> list[Result]:
    """Run every spec on ``jobs`` workers; a worker that dies is replaced (its case: crash).
    ``deadline`` (a ``time.monotonic()`` value): no case is started after it; the cases started
    finish and are returned (the campaign's first K cases, K reported by the caller)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
               PYTHONHASHSEED="0", INTQ_MAX_TENSOR_BYTES=str(options["intq_limit"]), PYTHONPATH=options["pythonpath"],
               TF_CPP_MIN_LOG_LEVEL="3")
    pending = list(reversed(specs))
    workers = [Worker(options, env) for _ in range(min(jobs, len(specs)) or 1)]
    results: list[Result] = []
    try:
        for w in workers:
            if pending:
                w.send(pending.pop())
        while any(w.busy for w in workers):
            ready, _, _ = select.select([w.proc.stdout for w in workers if w.busy], [], [], 5)
            for w in [w for w in workers if w.busy and w.proc.stdout in ready]:
                line = w.proc.stdout.readline()
                if not line:  # the worker itself died: the case crashed it
                    spec = w.busy
                    results.append(Result(spec["id"], spec["family"], spec["seed"], "crash",
                                          f"worker died (exit {w.proc.wait()})", "worker died"))
                    w.close()
                    workers[workers.index(w)] = w = Worker(options, env)
                else:
                    results.append(Result(**json.loads(line)))
                w.busy = None
                if progress:
                    progress(results[-1], len(results), len(specs))
                if pending and (deadline is None or time.monotonic() < deadline):
                    w.send(pending.pop())
    finally:
        for w in workers:
            w.close()
    return sorted(results, key=lambda r: r.id)


def summarize(results: list[Result]) -> dict:
    """The outcome table: per family and in total, and the defects grouped."""
    table: dict[str, Counter] = defaultdict(Counter)
    groups: dict[str, dict] = {}
    for r in results:
        table[r.family][r.outcome] += 1
        table["total"][r.outcome] += 1
        if r.outcome in DEFECTS:
            key = f"{r.outcome}: {r.group or r.detail[:120]}"
            g = groups.setdefault(key, {"outcome": r.outcome, "count": 0, "example": r.detail[:600],
                                        "cases": []})
            g["count"] += 1
            if len(g["cases"]) < 5:
                g["cases"].append({"id": r.id, "family": r.family, "seed": r.seed})
    return {"cases": len(results), "table": {k: dict(v) for k, v in sorted(table.items())},
            "defect_groups": dict(sorted(groups.items(), key=lambda kv: -kv[1]["count"])),
            "seconds": round(sum(r.seconds for r in results), 1)}


def format_table(summary: dict) -> str:
    cols = OUTCOMES
    width = max(len(k) for k in summary["table"]) + 2
    lines = [f"{'family':<{width}}" + "".join(f"{c:>16}" for c in cols)]
    for fam, counts in summary["table"].items():
        if fam == "total":
            continue
        lines.append(f"{fam:<{width}}" + "".join(f"{counts.get(c, 0):>16}" for c in cols))
    total = summary["table"].get("total", {})
    lines.append(f"{'total':<{width}}" + "".join(f"{total.get(c, 0):>16}" for c in cols))
    defects = sum(total.get(c, 0) for c in DEFECTS)
    lines.append(f"{summary['cases']} cases, {defects} defects in {len(summary['defect_groups'])} groups")
    for key, g in list(summary["defect_groups"].items())[:60]:
        lines.append(f"  {g['count']:>4}  {key[:150]}")
        lines.append(f"        e.g. case {g['cases'][0]}: {g['example'][:300]!r}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------- worker


def _worker_main(options: dict) -> None:
    """The zygote: build the corpus once, then fork a limited child per case read from stdin."""
    import resource
    import tempfile

    out = sys.stdout
    sys.stdout = sys.stderr  # nothing but verdict lines may reach the orchestrator
    from tests.fuzz import cases as case_lib

    scratch = Path(tempfile.mkdtemp(prefix="intq-fuzz-"))
    try:
        _serve(out, scratch, options, resource, case_lib)
    finally:
        if not options.get("keep"):
            subprocess.run(["rm", "-rf", str(scratch)], check=False)


def _serve(out, scratch: Path, options: dict, resource, case_lib) -> None:
    corpus = case_lib.Corpus.build(scratch / "corpus")
    out.write("ready\n")
    out.flush()
    base_vm = _vm_bytes()
    for line in sys.stdin:
        spec = json.loads(line)
        work = scratch / f"case{spec['id']}"
        work.mkdir()
        t0 = time.monotonic()
        verdict = _fork_case(spec, corpus, work, options, base_vm, resource)
        verdict.setdefault("seconds", round(time.monotonic() - t0, 3))
        out.write(json.dumps({"id": spec["id"], "family": spec["family"], "seed": spec["seed"], **verdict}) + "\n")
        out.flush()
        if options.get("keep"):
            continue
        subprocess.run(["rm", "-rf", str(work), str(work.parent / f"{work.name}.log")], check=False)


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _fork_case(spec, corpus, work: Path, options: dict, base_vm: int, resource) -> dict:
    """Fork the child that builds and runs the case; enforce the time limit; deliver the case's
    interrupt (signal, delay after the command started); classify a silent death as a crash."""
    from tests.fuzz import cases as case_lib

    interrupt = case_lib.interrupt_plan(spec)  # (signal, seconds after start) or None
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # ------------------------------------------------------------------ child
        try:
            os.close(rfd)
            os.setpgid(0, 0)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            limit = base_vm + options["memory"]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            cpu = int(options["timeout"]) + 5
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            log = os.open(str(work.parent / f"{work.name}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(work)
            verdict = case_lib.execute(spec, corpus, work, started=lambda: os.write(wfd, b"S"))
            os.write(wfd, json.dumps(verdict, default=str).encode())
        except BaseException as e:  # the harness itself failed: report it, never hang the worker
            try:
                os.write(wfd, json.dumps({"outcome": "traceback", "detail": f"harness: {type(e).__name__}: {e}",
                                          "group": f"harness {type(e).__name__}"}).encode())
            except BaseException:
                pass
        finally:
            os._exit(0)
    # ------------------------------------------------------------------------------ worker
    os.close(wfd)
    limit = min(spec.get("timeout", options["timeout"]), options["timeout"])
    deadline = time.monotonic() + limit
    interrupt_at = None
    chunks: list[bytes] = []
    status = None
    while True:
        now = time.monotonic()
        if interrupt_at is not None and now >= interrupt_at:
            with _suppress():
                os.kill(pid, interrupt[0])
            interrupt_at = None
        wait = min(deadline, interrupt_at or deadline) - now
        r, _, _ = select.select([rfd], [], [], max(wait, 0.0))
        if r:
            data = os.read(rfd, 1 << 20)
            if data:
                if not chunks and data.startswith(b"S"):  # the command started: arm the interrupt
                    data = data[1:]
                    if interrupt:
                        interrupt_at = time.monotonic() + interrupt[1]
                    if not data:
                        continue
                chunks.append(data)
                interrupt_at = None  # the verdict is coming: the command is over
                continue
            _, status = os.waitpid(pid, 0)  # pipe closed: the child has ended
            break
        if time.monotonic() >= deadline:
            with _suppress():
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(rfd)
            return {"outcome": "hang", "detail": f"{spec['family']} case still running after {limit} s",
                    "group": f"hang {spec['family']}"}
    os.close(rfd)
    with _suppress():
        os.killpg(pid, signal.SIGKILL)  # grandchildren (oracles) left behind
    if not chunks:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        name = signal.Signals(sig).name if sig else f"exit {os.WEXITSTATUS(status)}"
        tail = _tail(work.parent / f"{work.name}.log")
        return {"outcome": "crash", "detail": f"{spec['family']}: killed by {name}; {tail}",
                "group": f"crash {name} {spec['family']}"}
    return json.loads(b"".join(chunks))


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], (ProcessLookupError, PermissionError, OSError))


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-400:].replace("\n", " | ")
    except OSError:
        return ""


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        _worker_main(json.loads(sys.argv[2]))
    else:
        raise SystemExit("tests.fuzz.runner is started by tools/fuzz.py")
