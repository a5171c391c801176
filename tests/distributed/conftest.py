"""A real two-node Ray cluster on this machine, shared by the distributed tests of a session.

``ray start --head`` on 127.0.0.1 with a free port, then a second node with ``ray start --address``,
each with 1 CPU, an 80 MB object store and no dashboard; the test process connects as a driver
(``intq.distributed.connect(address)``). Token authentication with a token made for the session
(in the environment only: nothing is written to ~/.ray). Teardown ends exactly the processes these
commands started: each ``ray start`` runs in its own process group, and every process carrying the
session's token in its environment (the workers the raylets spawned) is ended too.
"""

from __future__ import annotations

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

import importlib.util

import pytest

if importlib.util.find_spec("ray") is None:  # not imported here: Ray reads its authentication settings on import
    pytest.skip("Ray is not installed (pip install 'intq[ray]'; the test extras install it)", allow_module_level=True)

OBJECT_STORE = 80 * 1024 * 1024  # Ray's minimum is 75 MB


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_with(marker: str) -> list[int]:
    """Pids of the processes whose environment holds ``marker`` (this session's token)."""
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
    """SIGTERM the process groups and the marked processes, then SIGKILL what is left after 5 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            try:
                os.killpg(g, sig)
            except ProcessLookupError:
                pass
        for pid in _processes_with(marker):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _processes_with(marker):
            time.sleep(0.2)
        if not _processes_with(marker):
            return


class RayCluster:
    """The running cluster: its ``address`` and the connected :class:`intq.distributed.Cluster`."""

    def __init__(self, address: str, cluster):
        self.address, self.cluster = address, cluster


@pytest.fixture(scope="session")
def ray_cluster():
    from intq.distributed import connect

    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray_bin is None:
        pytest.skip("the `ray` command is not installed next to this Python")
    token = secrets.token_hex(16)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_USAGE_STATS_ENABLED": "0"}
    temp = tempfile.mkdtemp(prefix="intq-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE),
              "--disable-usage-stats"]
    groups: list[int] = []
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    try:
        for cmd in ([ray_bin, "start", "--head", "--port", str(port), "--include-dashboard", "false",
                     "--temp-dir", temp, *common],
                    [ray_bin, "start", "--address", address, *common]):
            p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            groups.append(p.pid)
            out, _ = p.communicate(timeout=120)
            if p.returncode != 0:
                pytest.fail(f"`{' '.join(cmd)}` failed:\n{out[-3000:]}")
        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        import ray  # after the environment names the token

        cluster = connect(address)
        deadline = time.monotonic() + 60
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if time.monotonic() > deadline:
                pytest.fail("the second Ray node did not join within 60 s")
            time.sleep(0.5)
        yield RayCluster(address, cluster)
        cluster.close()
    finally:
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
