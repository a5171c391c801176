"""Calibration data: turn what a user has into validated samples ``{input name: array}``.

Accepted sources (:func:`iter_samples`):

* data in memory, through :mod:`intq.calibration.adapters`: arrays, dicts ``{input name: array}``,
  iterables of them, ``(x, y)`` pairs, a torch ``DataLoader``, an object with ``get_next()``
  (onnxruntime's ``CalibrationDataReader``), a function returning an iterator (TFLite's
  ``representative_dataset``), torch tensors; an array whose first dimension is larger than the
  graph input's batch is split into samples of that batch;
* a folder (``str``/``Path``) of ``.npy`` / ``.npz`` files (one array per input, by name or the only
  array) or of images (``.png``, ``.jpg``, ``.jpeg``, ``.bmp``), read in sorted order;
* one ``.npz`` (or ``.npy``) file with an array per input (samples along the first axis);
* a map-style dataset: an object with ``__len__`` and ``__getitem__`` (a PyTorch ``Dataset``)
  whose items are what an iterable would yield.

Everything is **streamed**: a folder is listed (names only) and read one file at a time, and an
array file whose arrays hold many samples is read a chunk of whole samples at a time
(:data:`STREAM_CHUNK_BYTES`), never whole, so memory is bounded by the batch being run, not by the
dataset (a 50,000-image folder or a 20 GB ``.npz`` calibrates in the memory of one batch).
Arrays stored in Fortran order cannot be read by rows and are read whole.

Images go through a preprocessing hook, by default :class:`ImagePreprocess`: resize to the input's
spatial size (bilinear), scale to [0, 1], normalise with ``mean``/``std`` per channel, lay out as
NCHW (or NHWC). Every sample is checked: shape, dtype kind, NaN/Inf — errors name the input and the
sample index (and the file).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import tokenize
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph
from intq.ir.facts import batch_of
from intq.limits import TensorTooLargeError, check_tensor_size

#: Samples per run in calibration, evaluation and comparison (``--batch-size``).
DEFAULT_BATCH_SIZE = 32

#: Array data read per chunk of a streamed .npy/.npz (rounded to whole samples, at least one).
STREAM_CHUNK_BYTES = 1 << 20

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
ARRAY_SUFFIXES = (".npy", ".npz")


class CalibrationDataError(IntqError, ValueError):
    """Calibration data is missing, malformed or does not fit the model's inputs."""


@dataclass(frozen=True)
class ImagePreprocess:
    """Image -> float32 array: resize to (height, width), ``(pixel/255 - mean) / std``, layout.

    ``mean``/``std`` are per channel (RGB order); the defaults are ImageNet's. ``layout`` is
    ``"NCHW"`` (PyTorch/ONNX) or ``"NHWC"``.
    """

    height: int
    width: int
    mean: tuple[float, ...] = (0.485, 0.456, 0.406)
    std: tuple[float, ...] = (0.229, 0.224, 0.225)
    layout: str = "NCHW"
    grayscale: bool = False

    def __post_init__(self):
        """Refuse, before any image is read, sizes that are not positive integers or too large
        (:mod:`intq.limits`), and a mean/std that is not finite, one value or one per channel."""
        channels = 1 if self.grayscale else 3
        for name in ("height", "width"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise CalibrationDataError(f"image {name} must be a positive integer, got {v!r}")
        try:
            check_tensor_size((1, channels, self.height, self.width), np.float32,
                              f"images resized to {self.height}x{self.width}")
        except TensorTooLargeError as e:
            raise CalibrationDataError(str(e)) from None
        for name in ("mean", "std"):
            v = tuple(getattr(self, name))
            if len(v) not in (1, channels) and not (len(v) == 3 and channels == 1):
                raise CalibrationDataError(f"image {name} needs 1 or {channels} values, got {len(v)}: {list(v)}")
            if not all(isinstance(x, (int, float, np.number)) and math.isfinite(x) for x in v):
                raise CalibrationDataError(f"image {name} must be finite numbers, got {list(v)}")
        if not all(s > 0 for s in self.std):
            raise CalibrationDataError(f"image std must be positive, got {list(self.std)}")
        if str(self.layout).upper() not in ("NCHW", "NHWC"):
            raise CalibrationDataError(f"layout must be NCHW or NHWC, got {self.layout!r}")

    def __call__(self, path: Path) -> np.ndarray:
        try:
            from PIL import Image
        except ImportError:
            raise CalibrationDataError("reading images needs Pillow: pip install pillow") from None
        try:
            with Image.open(path) as im:
                im = im.convert("L" if self.grayscale else "RGB").resize((self.width, self.height), Image.BILINEAR)
                x = np.asarray(im, dtype=np.float32) / 255.0
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:  # Pillow's ways to say "corrupt"
            raise CalibrationDataError(f"{path}: cannot read the image ({type(e).__name__}: {e})") from None
        if x.ndim == 2:
            x = x[:, :, None]
        mean, std = (np.asarray(v[: x.shape[2]] if len(v) >= x.shape[2] else v[:1], np.float32)
                     for v in (self.mean, self.std))
        x = (x - mean) / std
        if self.layout.upper() == "NCHW":
            x = x.transpose(2, 0, 1)
        elif self.layout.upper() != "NHWC":
            raise CalibrationDataError(f"layout must be NCHW or NHWC, got {self.layout!r}")
        return x[None].astype(np.float32)


def _default_preprocess(graph: Graph) -> ImagePreprocess:
    name = graph.inputs[0]
    shape = graph.tensors[name].shape
    if shape is None or len(shape) != 4:
        raise CalibrationDataError(f"image data needs a 4-D input; {name!r} has shape {shape}")
    if shape[1] in (1, 3):
        return ImagePreprocess(shape[2], shape[3], layout="NCHW", grayscale=shape[1] == 1)
    return ImagePreprocess(shape[1], shape[2], layout="NHWC", grayscale=shape[3] == 1)


def _files(folder: Path) -> list[str]:
    """The names of the data files in ``folder``, sorted (names only: nothing is read)."""
    with os.scandir(folder) as entries:
        names = sorted(e.name for e in entries if os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES + ARRAY_SUFFIXES)
    if not names:
        raise CalibrationDataError(
            f"{folder}: no calibration files ({', '.join(IMAGE_SUFFIXES + ARRAY_SUFFIXES)}) in this folder"
        )
    return names


#: What a damaged or foreign .npy/.npz raises inside numpy and zipfile while it is read.
#: what numpy raises on a corrupt .npy / .npz (a header cut mid-dict: tokenize's TokenError, from
#: numpy's header parser on a header it must repair; issue 27 item 6)
_UNREADABLE = (OSError, ValueError, EOFError, SyntaxError, tokenize.TokenError, zipfile.BadZipFile, zlib.error, KeyError,
               UnicodeError)


def _npy_header(f, where: str, check_size: bool = True) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from an .npy header (nothing else is read), checked against the size limit."""
    shape, _, dtype = _npy_header_full(f, where, check_size)
    return shape, dtype


def _npy_header_full(f, where: str, check_size: bool = True) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) from an .npy header; the whole array is checked against the
    size limit unless ``check_size`` is False (a streamed file is checked a chunk at a time)."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version in ((2, 0), (3, 0)):  # 3.0 differs from 2.0 only in the header's text encoding (UTF-8)
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise CalibrationDataError(f"{where}: .npy format version {version} is not one numpy writes")
    if dtype.hasobject:
        raise CalibrationDataError(f"{where}: holds Python objects (a pickled array); save numbers, e.g. "
                                   "np.save(path, x.astype(np.float32))")
    if check_size:
        _check_size(shape, dtype, where)
    return shape, fortran, dtype


def _check_size(shape, dtype, where: str) -> None:
    try:
        check_tensor_size(shape, dtype, where)
    except TensorTooLargeError as e:
        raise CalibrationDataError(str(e)) from None


def array_headers(path: str | Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{name: (shape, dtype)}`` of an .npy (name ``""``) or .npz file, from the headers only."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".npy":
            with open(path, "rb") as f:
                return {"": _npy_header(f, str(path))}
        with zipfile.ZipFile(path) as z:
            out = {}
            for member in z.namelist():
                with z.open(member) as f:
                    out[member[:-4] if member.endswith(".npy") else member] = _npy_header(f, f"{path}: {member}")
            return out
    except CalibrationDataError:
        raise
    except _UNREADABLE as e:
        raise CalibrationDataError(f"{path}: cannot read the array file ({type(e).__name__}: {e})") from None


def read_arrays(path: str | Path) -> np.ndarray | dict[str, np.ndarray]:
    """The array of an .npy file, or ``{name: array}`` of an .npz, read safely: every header is
    checked (no pickled objects, within the size limit, :mod:`intq.limits`) before its data is read,
    and a damaged file raises :class:`CalibrationDataError` naming it."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".npy":
            with open(path, "rb") as f:
                _npy_header(f, str(path))
                f.seek(0)
                return np.lib.format.read_array(f, allow_pickle=False)
        arrays = {}
        with zipfile.ZipFile(path) as z:
            for member in z.namelist():
                where = f"{path}: {member}"
                with z.open(member) as f:
                    _npy_header(f, where)
                with z.open(member) as f:
                    arrays[member[:-4] if member.endswith(".npy") else member] = np.lib.format.read_array(
                        f, allow_pickle=False)
        return arrays
    except CalibrationDataError:
        raise
    except _UNREADABLE as e:
        raise CalibrationDataError(f"{path}: cannot read the array file ({type(e).__name__}: {e})") from None


def _load_array_file(path: Path, graph: Graph):
    arrays = read_arrays(path)
    if isinstance(arrays, np.ndarray):
        return arrays
    if len(arrays) == 1 and len(graph.inputs) == 1 and graph.inputs[0] not in arrays:
        return next(iter(arrays.values()))
    return arrays


def _samples_along_batch(shapes: Mapping[str, tuple[int, ...]], graph: Graph) -> int:
    """How many samples arrays of these shapes hold along the batch axis (the rule of
    :func:`_split`): each input's array counts ``rows / b`` when it has the input's rank, the input's
    trailing shape and a multiple of its batch ``b`` rows, else 1; one count for all, else 1."""
    counts = set()
    for name, arr_shape in shapes.items():
        shape = graph.tensors[name].shape
        if shape and len(arr_shape) == len(shape) and shape[0] and arr_shape[0] % shape[0] == 0 \
                and tuple(arr_shape[1:]) == tuple(shape[1:]):
            counts.add(arr_shape[0] // shape[0])
        else:
            counts.add(1)
    return counts.pop() if len(counts) == 1 else 1


def _array_file_items(path: Path, graph: Graph) -> Iterator[object]:
    """The raw items of one .npy/.npz file: chunks of whole samples read one after another
    (:data:`STREAM_CHUNK_BYTES` at a time) when its arrays hold several samples along the batch
    axis, else the file's arrays whole (one sample, or Fortran-ordered arrays)."""
    where = str(path)
    try:
        with contextlib.ExitStack() as stack:
            if path.suffix.lower() == ".npy":
                streams = {"": stack.enter_context(open(path, "rb"))}
                wheres = {"": where}
            else:
                z = stack.enter_context(zipfile.ZipFile(path))
                streams = {(m[:-4] if m.endswith(".npy") else m): stack.enter_context(z.open(m)) for m in z.namelist()}
                wheres = {k: f"{path}: {k}.npy" for k in streams}
            headers = {k: _npy_header_full(f, wheres[k], check_size=False) for k, f in streams.items()}
            if len(headers) == 1 and len(graph.inputs) == 1 and graph.inputs[0] not in headers:
                (key,) = headers
                streams, headers, wheres = ({graph.inputs[0]: v[key]} for v in (streams, headers, wheres))
            n = 1 if not set(headers) <= set(graph.inputs) or any(h[1] and len(h[0]) > 1 for h in headers.values()) \
                else _samples_along_batch({k: h[0] for k, h in headers.items()}, graph)
            if n > 1 and set(headers) == set(graph.inputs):
                yield from _stream_rows(streams, headers, wheres, graph, n)
                return
    except CalibrationDataError:
        raise
    except _UNREADABLE as e:
        raise CalibrationDataError(f"{path}: cannot read the array file ({type(e).__name__}: {e})") from None
    yield _load_array_file(path, graph)  # one sample, or arrays that cannot be read by rows: whole


def _stream_rows(streams, headers, wheres, graph: Graph, n: int) -> Iterator[dict[str, np.ndarray]]:
    """``n`` samples read from each input's stream (positioned after its header) a chunk at a time:
    ``{input: rows}`` with ``k`` samples' rows of every input per chunk."""
    batch = {k: graph.tensors[k].shape[0] for k in streams}
    sample_bytes = {k: batch[k] * int(np.prod(h[0][1:], dtype=np.int64)) * h[2].itemsize for k, h in headers.items()}
    per_chunk = max(1, STREAM_CHUNK_BYTES // max(1, sum(sample_bytes.values())))
    for k, h in headers.items():
        _check_size((per_chunk * batch[k], *h[0][1:]), h[2], f"{wheres[k]}: {per_chunk} samples")
    for start in range(0, n, per_chunk):
        count = min(per_chunk, n - start)
        chunk = {}
        for k, f in streams.items():
            shape, _, dtype = headers[k]
            buf = bytearray(count * sample_bytes[k])
            got = f.readinto(buf)
            if got != len(buf):
                raise CalibrationDataError(f"{wheres[k]}: the data ends inside sample {start + got // sample_bytes[k]} "
                                           f"of the {n} its header announces (a truncated file)")
            chunk[k] = np.frombuffer(buf, dtype=dtype).reshape((count * batch[k], *shape[1:]))
        yield chunk


def _raw_items(data, graph: Graph, preprocess: Callable | None) -> Iterator[tuple[object, str]]:
    """Yield (raw item, where) pairs from any supported source, one at a time (see the module
    docstring: nothing is read ahead)."""
    if isinstance(data, (str, Path)):
        path = Path(data)
        if path.is_dir():
            pre = preprocess or _default_preprocess(graph)
            for name in _files(path):
                f = path / name
                if f.suffix.lower() in IMAGE_SUFFIXES:
                    yield pre(f), str(f)
                else:
                    for item in _array_file_items(f, graph):
                        yield item, str(f)
            return
        if path.is_file() and path.suffix.lower() in ARRAY_SUFFIXES:
            for item in _array_file_items(path, graph):
                yield item, str(path)
            return
        raise CalibrationDataError(f"{path}: not a folder of calibration files nor a .npy/.npz file")
    # in memory: arrays, dicts, (x, y) pairs, DataLoaders, readers, callables (intq.calibration.adapters,
    # which builds on this module: imported here, not at the top)
    from intq.calibration.adapters import Source

    yield from (data if isinstance(data, Source) else Source(data)).items(graph)


def iter_batches(data, graph: Graph, batch_size: int = DEFAULT_BATCH_SIZE, preprocess: Callable | None = None,
                 limit: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """The samples of :func:`iter_samples` (at most ``limit``) joined along the batch axis into
    runs of ``batch_size`` samples (the last one shorter): what one :class:`intq.Interpreter` run
    takes. A graph whose inputs have no common batch axis (:func:`has_batch_axis`) runs one sample
    per run."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise CalibrationDataError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    for joined, _ in grouped(iter_samples(data, graph, preprocess), graph, batch_size, limit):
        yield joined


def grouped(samples: Iterable[dict[str, np.ndarray]], graph: Graph, batch_size: int, limit: int | None = None
            ) -> Iterator[tuple[dict[str, np.ndarray], list[int]]]:
    """``samples`` (at most ``limit``) joined ``batch_size`` at a time along the batch axis: yields
    ``(joined, rows)`` with ``rows`` the leading size of each sample joined, in order. Samples are
    joined only when every input has a batch axis: rank >= 2 and one leading size for all inputs
    (a recurrent state ``[layers, batch, hidden]`` beside an input ``[batch, n]`` has none: such
    samples run one by one)."""
    if not has_batch_axis(graph):
        batch_size = 1
    pending: list[dict[str, np.ndarray]] = []
    if limit is not None:  # islice: the sample after the last one is never asked for (a one-pass source keeps it)
        samples = itertools.islice(samples, max(limit, 0))
    for sample in samples:
        pending.append(sample)
        if len(pending) == batch_size:
            yield _join(pending), _rows(pending, graph)
            pending = []
    if pending:
        yield _join(pending), _rows(pending, graph)


def samples_in(run: Mapping[str, np.ndarray], graph: Graph) -> int:
    """How many samples one run's inputs hold: the first input's leading size over the graph's
    own batch (1 for inputs without a batch axis, :func:`grouped`)."""
    shape = graph.tensors[graph.inputs[0]].shape
    arr = run[graph.inputs[0]]
    if not has_batch_axis(graph) or np.ndim(arr) != len(shape):
        return 1
    b0 = shape[0] if shape[0] is not None and shape[0] > 0 else 1
    return max(int(np.shape(arr)[0]) // b0, 1)


def _rows(samples: list[dict[str, np.ndarray]], graph: Graph) -> list[int]:
    first = graph.inputs[0]
    return [int(s[first].shape[0]) if s[first].ndim else 1 for s in samples]


def _join(samples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if len(samples) == 1:
        return samples[0]
    return {k: np.concatenate([s[k] for s in samples]) for k in samples[0]}


def iter_samples(data, graph: Graph, preprocess: Callable | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Validated samples ``{input name: array}`` with the graph inputs' shapes (any leading batch
    for inputs of rank >= 2: the interpreter binds it per run).

    Raises :class:`CalibrationDataError` naming the input, the sample index and where it came
    from; an empty source is an error too.
    """
    count = 0
    for raw, where in _raw_items(data, graph, preprocess):
        for sample in _split(raw, graph, where):
            _validate(sample, graph, count, where)
            yield sample
            count += 1
    if count == 0:
        raise CalibrationDataError("the calibration data is empty: give at least one sample")


def _split(raw, graph: Graph, where: str) -> Iterator[dict[str, np.ndarray]]:
    if isinstance(raw, Mapping):
        arrays = {k: np.asarray(v) for k, v in raw.items()}
    else:
        if len(graph.inputs) != 1:
            raise CalibrationDataError(
                f"{where}: the model has inputs {list(graph.inputs)}; give a dict of arrays per sample"
            )
        arrays = {graph.inputs[0]: np.asarray(raw)}
    unknown = sorted(set(arrays) - set(graph.inputs))
    missing = [n for n in graph.inputs if n not in arrays]
    if unknown or missing:
        raise CalibrationDataError(f"{where}: sample has {sorted(arrays)}, the model takes {list(graph.inputs)}")
    # split along the batch axis when the arrays hold several samples of the input's batch size
    n = _samples_along_batch({k: a.shape for k, a in arrays.items()}, graph)
    if n == 1:
        yield arrays
        return
    for i in range(n):
        yield {k: a[i * graph.tensors[k].shape[0]:(i + 1) * graph.tensors[k].shape[0]] for k, a in arrays.items()}


def _batch_free(shape) -> bool:
    """Whether an input of this declared shape takes any batch: rank >= 2 (its leading dimension is
    the batch; :class:`intq.Interpreter` binds it per run)."""
    return shape is not None and len(shape) >= 2


def has_batch_axis(graph: Graph) -> bool:
    """Whether the graph's inputs share a batch axis the samples can be joined on: every input of
    rank >= 2 with one leading size for all (a recurrent state ``[layers, batch, hidden]`` beside an
    input ``[batch, n]`` has none)."""
    return all(_batch_free(graph.tensors[n].shape) for n in graph.inputs) and batch_of(graph) is not None


def _validate(sample: Mapping[str, np.ndarray], graph: Graph, index: int, where: str) -> None:
    batch_axis = has_batch_axis(graph)
    for name in graph.inputs:
        t = graph.tensors[name]
        arr = sample[name]
        free = 1 if batch_axis and arr.ndim == len(t.shape) and arr.shape[0] >= 1 else 0
        if t.shape is not None and (arr.ndim != len(t.shape) or any(
                d is not None and d != s for d, s in zip(tuple(t.shape)[free:], arr.shape[free:]))):
            raise CalibrationDataError(
                f"sample {index} ({where}): input {name!r} has shape {tuple(arr.shape)}, the model expects {t.shape}"
            )
        if np.issubdtype(t.dtype, np.floating):
            if arr.dtype.kind not in "iuf":  # complex would lose its imaginary part, bool/str/objects mean nothing
                raise CalibrationDataError(f"sample {index} ({where}): input {name!r} is {arr.dtype}, not real numbers")
            if not np.all(np.isfinite(arr)):
                raise CalibrationDataError(f"sample {index} ({where}): input {name!r} contains NaN or Inf")
