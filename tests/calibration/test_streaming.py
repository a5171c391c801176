"""Streaming data: folders, .npy/.npz files and datasets are read a chunk at a time, memory bounded by
the batch, not by the dataset (issue 28 item 1)."""

import os
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile

import numpy as np
import pytest

import intq
from intq.calibration import CalibrationDataError, calibrate, iter_batches, iter_samples
from intq.calibration import data as data_module
from intq.ir import Graph, Node, Tensor

SHAPE = (1, 3, 32, 32)  # 12 KiB per float32 sample


def _relu_graph(shape=SHAPE) -> Graph:
    return Graph(nodes=[Node("Relu", "relu", ("x",), ("y",))],
                 tensors={"x": Tensor("x", shape=shape), "y": Tensor("y", shape=shape)}, inputs=("x",), outputs=("y",))


def _peak(fn) -> int:
    """Peak bytes traced by tracemalloc (numpy reports its buffers to it) while ``fn`` runs."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _consume(source, graph, batch_size=16, expect=None):
    n = 0
    for b in iter_batches(source, graph, batch_size):
        if expect is not None:
            assert np.array_equal(b["x"], expect[n:n + b["x"].shape[0]])
        n += b["x"].shape[0]
    return n


@pytest.mark.parametrize("kind", ["npy", "npz", "npz_compressed", "folder_of_npz"])
def test_array_files_stream_in_chunks_with_the_same_samples(tmp_path, kind):
    g = _relu_graph()
    x = np.random.default_rng(0).normal(size=(2000, *SHAPE[1:])).astype(np.float32)  # 24 MiB
    if kind == "npy":
        src = tmp_path / "x.npy"
        np.save(src, x)
    elif kind == "npz":
        src = tmp_path / "x.npz"
        np.savez(src, x=x)
    elif kind == "npz_compressed":
        src = tmp_path / "x.npz"
        np.savez_compressed(src, x)  # one unnamed array: the single input's
    else:
        src = tmp_path / "parts"
        src.mkdir()
        for i in range(4):
            np.savez(src / f"part{i}.npz", x=x[i * 500:(i + 1) * 500])
    got = []
    peak = _peak(lambda: got.append(_consume(src, g, expect=x)))
    assert got == [2000]
    # a chunk (STREAM_CHUNK_BYTES) and a batch at a time, not the file's 24 MiB
    assert peak < 6 * data_module.STREAM_CHUNK_BYTES, peak


def test_a_fortran_ordered_array_is_read_whole_and_a_truncated_file_is_named(tmp_path):
    g = _relu_graph()
    x = np.random.default_rng(1).normal(size=(40, *SHAPE[1:])).astype(np.float32)
    np.save(tmp_path / "f.npy", np.asfortranarray(x))
    assert _consume(tmp_path / "f.npy", g, expect=x) == 40
    np.save(tmp_path / "t.npy", x)
    size = os.path.getsize(tmp_path / "t.npy")
    with open(tmp_path / "t.npy", "r+b") as f:
        f.truncate(size - 100)
    with pytest.raises(CalibrationDataError, match=r"t\.npy.*inside sample 39 of the 40.*truncated"):
        _consume(tmp_path / "t.npy", g)


def test_a_multi_input_npz_streams_every_input_in_step(tmp_path):
    shape = (1, 4, 8)
    g = Graph(nodes=[Node("Add", "add", ("a", "b"), ("y",))],
              tensors={"a": Tensor("a", shape=shape), "b": Tensor("b", shape=shape), "y": Tensor("y", shape=shape)},
              inputs=("a", "b"), outputs=("y",))
    rng = np.random.default_rng(2)
    a, b = (rng.normal(size=(70_000, 4, 8)).astype(np.float32) for _ in range(2))
    np.savez(tmp_path / "ab.npz", a=a, b=b)
    n = 0
    for s in iter_batches(tmp_path / "ab.npz", g, 1000):
        k = s["a"].shape[0]
        assert np.array_equal(s["a"], a[n:n + k]) and np.array_equal(s["b"], b[n:n + k])
        n += k
    assert n == 70_000


def test_an_image_folder_is_read_one_image_at_a_time(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(3)
    for i in range(120):
        Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(tmp_path / f"{i:04d}.png")
    g = _relu_graph()
    total = 120 * int(np.prod(SHAPE)) * 4  # what the whole folder would hold as float32
    counted = []
    peak = _peak(lambda: counted.append(_consume(tmp_path, g, batch_size=8)))
    assert counted == [120]
    assert peak < total / 4, (peak, total)


def test_a_map_style_dataset_is_read_by_index():
    class Dataset:  # what a torch.utils.data.Dataset offers: no __iter__
        def __init__(self, n):
            self.n, self.read = n, []

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            self.read.append(i)
            return np.full(SHAPE, i, np.float32)

    ds = Dataset(10)
    samples = iter_samples(ds, _relu_graph())
    assert float(next(samples)["x"].mean()) == 0.0 and ds.read == [0]  # lazily
    assert [float(s["x"].mean()) for s in samples] == list(range(1, 10))
    with pytest.raises(CalibrationDataError, match="dataset"):
        list(iter_samples(3.5, _relu_graph()))


def _sparse_npy(path, rows: int) -> int:
    """An .npy of ``rows`` zero samples of SHAPE written as a sparse file (no disk used): its size."""
    header = {"descr": "<f4", "fortran_order": False, "shape": (rows, *SHAPE[1:])}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.truncate(f.tell() + rows * int(np.prod(SHAPE)) * 4)
    return os.path.getsize(path)


def _compressed_zeros_npz(path, rows: int) -> None:
    """An .npz whose one member holds ``rows`` zero samples, deflated (a few hundred KiB on disk)."""
    zeros = np.zeros((256, *SHAPE[1:]), np.float32).tobytes()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("x.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                                     "shape": (rows, *SHAPE[1:])})
            for _ in range(rows // 256):
                f.write(zeros)


def test_more_samples_than_the_memory_limit_holds_stream_through_a_process_limited_to_it(tmp_path):
    """A child process whose address space is capped (RLIMIT_AS) 256 MiB above what it uses once
    imported reads 768 MiB of samples from an .npy and from an .npz and calibrates on them batch by
    batch; reading either whole fails in the same process (so the limit binds)."""
    rows = 768 * 1024 * 1024 // (int(np.prod(SHAPE)) * 4)  # 768 MiB of samples
    _sparse_npy(tmp_path / "big.npy", rows)
    _compressed_zeros_npz(tmp_path / "big.npz", rows)
    script = textwrap.dedent(f"""
        import resource, sys
        import numpy as np
        from intq.calibration import iter_batches
        from intq.calibration.observers import MinMaxObserver
        from intq.ir import Graph, Node, Tensor
        shape = {SHAPE!r}
        g = Graph(nodes=[Node("Relu", "relu", ("x",), ("y",))],
                  tensors={{"x": Tensor("x", shape=shape), "y": Tensor("y", shape=shape)}},
                  inputs=("x",), outputs=("y",))
        vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), vm + (256 << 20)))
        for name in ("big.npy", "big.npz"):
            path = {str(tmp_path)!r} + "/" + name
            obs, n = MinMaxObserver(), 0
            for b in iter_batches(path, g, 64):
                obs.update(b["x"])
                n += b["x"].shape[0]
            assert n == {rows} and obs.range() == (0.0, 0.0), (n, obs.range())
            try:
                np.load(path)["x"] if name.endswith(".npz") else np.load(path)
            except MemoryError:
                print(name, "streamed", n, "whole: MemoryError")
            else:
                sys.exit(name + " was read whole under the limit: the test proves nothing")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == [f"big.npy streamed {rows} whole: MemoryError",
                                           f"big.npz streamed {rows} whole: MemoryError"]


def test_calibration_on_a_streamed_file_equals_calibration_on_the_arrays(tmp_path):
    g = intq.load(_conv_model(), input_shapes={"x": SHAPE})
    x = np.random.default_rng(4).normal(size=(300, *SHAPE[1:])).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for method in ("minmax", "ema", "percentile"):
        a = calibrate(g, tmp_path / "x.npy", method, batch_size=16)
        b = calibrate(g, [x[i:i + 1] for i in range(300)], method, batch_size=16)
        assert a.states == b.states and a.ranges == b.ranges


def _conv_model():
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(5).normal(size=(4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
