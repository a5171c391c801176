"""A real Ray cluster of several nodes on this machine, for tests and benchmarks (not a mock).

:func:`local_cluster` runs ``ray start --head`` on 127.0.0.1 with a free port, then ``nodes - 1``
more ``ray start --address`` nodes, each with ``cpus`` CPUs, an 80 MB object store and no dashboard,
with token authentication from a token made for the run (set in this process's environment and the
nodes', nothing written to ~/.ray). It yields the head's address; this process can then
:func:`intq.distributed.connect` to it. On exit it ends exactly the processes it started: each
``ray start`` runs in its own process group, and every process whose environment holds the run's
token (the workers the raylets spawn) is ended too — SIGTERM, then SIGKILL after 5 s.

Ray reads its authentication settings when it is imported: call this before ``import ray`` in the
process (the token is put in ``os.environ`` first).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Object store per node (bytes): Ray's minimum is 75 MB.
OBJECT_STORE = 80 * 1024 * 1024


class RayStartError(RuntimeError):
    """``ray start`` failed or a node did not join (the message holds its output)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_with(marker: str) -> list[int]:
    """Pids of the processes (other than this one) whose environment holds ``marker``."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if marker.encode() in (d / "environ").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def _end(groups: list[int], marker: str) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(g, sig)
        for pid in processes_with(marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and processes_with(marker):
            time.sleep(0.2)
        if not processes_with(marker):
            return


def ray_command() -> str | None:
    """The ``ray`` command next to this Python (the venv's), or on PATH."""
    return shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")


@contextlib.contextmanager
def local_cluster(nodes: int = 2, cpus: int = 1, join_timeout: float = 60.0):
    """Yield the address ``127.0.0.1:PORT`` of a running ``nodes``-node cluster (module docstring)."""
    ray_bin = ray_command()
    if ray_bin is None:
        raise RayStartError("the `ray` command is not installed (pip install 'intq[ray]')")
    token = secrets.token_hex(16)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_USAGE_STATS_ENABLED": "0"}
    temp = tempfile.mkdtemp(prefix="intq-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = free_port()
    address = f"127.0.0.1:{port}"
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus), "--object-store-memory", str(OBJECT_STORE),
              "--disable-usage-stats"]
    commands = [[ray_bin, "start", "--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", temp,
                 *common]] + [[ray_bin, "start", "--address", address, *common]] * (nodes - 1)
    groups: list[int] = []
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    try:
        for cmd in commands:
            p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            groups.append(p.pid)
            out, _ = p.communicate(timeout=120)
            if p.returncode != 0:
                raise RayStartError(f"`{' '.join(cmd)}` failed:\n{out[-3000:]}")
        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        yield address
    finally:
        with contextlib.suppress(ImportError):
            if "ray" in sys.modules:
                import ray

                if ray.is_initialized():
                    ray.shutdown()
        _end(groups, token)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(temp, ignore_errors=True)


def wait_for_nodes(count: int, timeout: float = 60.0) -> None:
    """Wait until the connected cluster has ``count`` live nodes (:class:`RayStartError` after ``timeout``)."""
    import ray

    deadline = time.monotonic() + timeout
    while len([n for n in ray.nodes() if n["Alive"]]) < count:
        if time.monotonic() > deadline:
            raise RayStartError(f"{count} Ray nodes did not join within {timeout:g} s")
        time.sleep(0.5)
