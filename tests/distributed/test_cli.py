"""``intq quantize / eval / compare --cluster ADDRESS`` as a user runs them (a subprocess connecting to
the two-node cluster): the same JSON numbers and the same calibration table as without it; an address
nobody listens on is an intq error naming it, at once."""

import json
import socket
import time

import numpy as np
import pytest

from intq.distributed import ClusterError, connect
from intq.testing.digits import load_split

from ..test_cli import MODEL, run


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_cluster")
    (x_train, _), (x_test, y_test) = load_split()
    np.savez(d / "calib.npz", image=x_train[:96])
    np.savez(d / "val.npz", image=x_test[:300])
    np.save(d / "labels.npy", y_test[:300])
    return d


@pytest.fixture
def free_cpus(ray_cluster):
    """The subprocess starts its own workers: end this process's (they hold the cluster's 2 CPUs)."""
    import ray

    from intq.distributed.cluster import _end_pool

    _end_pool(ray)
    return ray_cluster.address


def _without_seconds(doc):
    return {k: v for k, v in doc.items() if not k.startswith("seconds")}


def test_quantize_eval_and_compare_with_cluster_give_the_local_results(files, free_cpus):
    d, address = files, free_cpus
    common = ["--input-shape", "image=1x1x8x8", "--json"]
    for flags, out in (([], "local"), (["--cluster", address], "ray")):
        r = run("quantize", MODEL, *common, "--calib", str(d / "calib.npz"), "--batch-size", "16", "-o",
                str(d / f"{out}.tflite"), "--calib-table", str(d / f"{out}.json"), "--method", "auto", *flags)
        assert r.returncode == 0, r.stderr
    assert (d / "local.json").read_text() == (d / "ray.json").read_text()  # ranges and observer states
    assert (d / "local.tflite").read_bytes() == (d / "ray.tflite").read_bytes()
    docs = {}
    for cmd, extra in (("eval", ["--labels", str(d / "labels.npy")]), ("compare", ["--top", "0"])):
        for flags in ([], ["--cluster", address, "--workers", "2"]):
            r = run(cmd, MODEL, str(d / "local.tflite"), *common, "--data", str(d / "val.npz"), *extra, *flags)
            assert r.returncode == 0, r.stderr
            docs[cmd, bool(flags)] = _without_seconds(json.loads(r.stdout))
        assert docs[cmd, True] == docs[cmd, False]
    assert docs["eval", True]["samples"] == 300 and docs["eval", True]["int_accuracy"] > 0.9


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket is: nobody listens there


def test_an_unreachable_cluster_is_an_error_naming_it(files):
    address = f"127.0.0.1:{_closed_port()}"
    t = time.monotonic()
    r = run("eval", MODEL, "--input-shape", "image=1x1x8x8", "--calib", str(files / "calib.npz"),
            "--data", str(files / "val.npz"), "--cluster", address)
    assert r.returncode == 1 and time.monotonic() - t < 60
    assert f"cannot reach the Ray cluster at '{address}'" in r.stderr and "ray start --head" in r.stderr
    assert "Traceback" not in r.stderr
    with pytest.raises(ClusterError, match=f"cannot reach the Ray cluster at '{address}'"):
        connect(address)
    with pytest.raises(ClusterError, match="not HOST:PORT"):
        connect("headnode")
    with pytest.raises(ClusterError, match="workers must be a positive integer"):
        connect(workers=0)


def test_what_ray_prints_on_the_driver_goes_to_stderr(ray_cluster, capsys):
    """Ray's driver prints a worker's death ("(raylet) Task ... will be retried") on stdout; intq's
    stdout is its output (``--json``): connect() sends those lines to stderr."""
    from ray._private import worker as ray_worker

    ray_worker.print_to_stdstream({"lines": ["Task Worker.evaluate failed"], "pid": "raylet", "is_err": False},
                                  ignore_prefix=False)
    out, err = capsys.readouterr()
    assert "Task Worker.evaluate failed" in err and out == ""
