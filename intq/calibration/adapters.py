"""The data users already have, as the samples :mod:`intq.calibration.data` reads.

Every function that takes data (``intq.quantize``, ``intq.calibrate``, ``intq.compare``,
:func:`intq.analysis.evaluate.evaluate`, the pipeline) accepts, besides the files and folders of
:mod:`intq.calibration.data`:

| what you have | how intq reads it |
|---|---|
| an array (one sample, or a batch along the input's batch axis) or a dict ``{input name: array}`` | one item |
| an iterable (list, generator...) of arrays or of dicts | item by item |
| an iterable of ``(x, y)`` pairs (x: an array, a dict or a list of arrays; y: labels) | x as the sample; y kept as the labels where labels help (accuracy in ``evaluate`` / ``compare``), ignored in calibration |
| an iterable of lists of arrays, one per input, in the model's input order (TFLite's ``representative_dataset`` yields ``[x]``) | one dict per list |
| ``torch.utils.data.DataLoader`` (batches of tensors; ``[x, y]`` from a dataset of pairs) | any iterable, as above; tensors become arrays (``.detach().cpu().numpy()``) |
| an object with ``get_next()`` returning a dict or None at the end (onnxruntime's ``CalibrationDataReader``) | ``get_next()`` until None; ``rewind()`` before another pass when it has one |
| a zero-argument callable returning an iterator (TFLite's ``representative_dataset``) | called once per pass |
| a map-style dataset (``__len__`` and ``__getitem__``, a PyTorch ``Dataset``) | by index, one item at a time |
| torch tensors (and anything with ``__array__``) wherever an array goes | as arrays |

A pair and a list of arrays are told apart by the model's inputs: a list of as many arrays as the
model has inputs (more than one) is one array per input; a pair ``(x, y)`` for a single-input model
(or one element more than the inputs) carries labels. Anything else (a string, ``None``, a list of
the wrong length) raises :class:`~intq.calibration.data.CalibrationDataError` naming the adapter,
the item and the inputs the model expects; shapes and dtypes are then checked by
:mod:`intq.calibration.data` with the same ``where`` (e.g. ``DataLoader batch 3``).

:class:`Source` wraps one of them. It is replayable: a re-iterable source (a list, a
``DataLoader``, a callable) is read again on each pass; a one-pass source (a generator, a reader
without ``rewind``) keeps its first ``keep`` samples in memory as they stream by, and a later pass
replays those (the pipeline's later passes read only the first few samples: export check, layer
report, bias correction); a pass beyond them is an error saying so. :func:`count` tells how many
samples a source holds when that is cheap (progress ETAs), :func:`input_shapes_from_data` the
shape of each input in the first sample (a model's dynamic dimensions bound from the data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from intq.calibration.data import (ARRAY_SUFFIXES, IMAGE_SUFFIXES, CalibrationDataError, array_headers,
                                   has_batch_axis)
from intq.errors import IntqError
from intq.ir import Graph

#: dict keys that hold labels, not an input (Hugging Face datasets' ``labels``, common names)
LABEL_KEYS = ("label", "labels", "y", "target", "targets")


def is_array_like(v) -> bool:
    """An array, a tensor (torch, TensorFlow, JAX: ``__array__``), a number: what an input can be."""
    return isinstance(v, (np.ndarray, np.generic, int, float)) and not isinstance(v, bool) or _is_tensor(v) \
        or (hasattr(v, "__array__") and not isinstance(v, (str, bytes, Mapping)))


def _is_tensor(v) -> bool:
    return type(v).__module__.split(".")[0] == "torch" and hasattr(v, "detach")


def to_array(v, where: str) -> np.ndarray:
    """``v`` as a numpy array: a torch tensor through ``.detach().cpu().numpy()`` (gradients, devices
    and all), others through ``np.asarray``; a string, bytes, None or a nested list of other things is
    an error naming ``where``."""
    if _is_tensor(v):
        return v.detach().cpu().numpy()
    if v is None or isinstance(v, (str, bytes)) or isinstance(v, Mapping):
        raise CalibrationDataError(f"{where}: a {type(v).__name__}, not an array")
    try:
        a = np.asarray(v)
    except (ValueError, TypeError) as e:  # ragged lists: "inhomogeneous part", objects numpy cannot hold
        raise CalibrationDataError(f"{where}: cannot be read as one array ({type(e).__name__}: {e}); give "
                                   "arrays, dicts {input name: array}, or (x, y) pairs") from None
    if a.dtype == object:
        raise CalibrationDataError(f"{where}: holds Python objects ({type(v).__name__}), not numbers")
    return a


class Source:
    """A replayable data source (the module docstring): :meth:`items` yields ``(item, where)`` with
    ``item`` an array or ``{input: array}``; the labels of the last pass are :meth:`labels`.

    ``data``: anything the module docstring lists (not a path); ``keep``: samples of a one-pass
    source kept for later passes (0: none)."""

    def __init__(self, data, keep: int = 0):
        if isinstance(data, Source):
            data, keep = data.data, max(keep, data.keep)
        if isinstance(data, (str, Path)):
            raise TypeError("Source wraps data in memory; paths are read by intq.calibration.data")
        self.data, self.keep = data, keep
        self.kind = _kind(data)
        self.name = _name(data, self.kind)
        self._cache: list[tuple[object, str, object]] = []  # a one-pass source's first items
        self._cached_samples = 0
        self._live: Iterator[tuple[object, str]] | None = None  # a one-pass source's stream, where it stopped
        self._consumed = 0  # items taken from it
        self._exhausted = False
        self._read = False  # the wrapped data was read (a reader is rewound before it is read again)
        self._labels: list[np.ndarray] = []

    # -- passes ---------------------------------------------------------------------------------

    @property
    def one_pass(self) -> bool:
        """Whether reading the source consumes it (a generator, an iterator, a reader without rewind)."""
        if self.kind == "reader":
            return not callable(getattr(self.data, "rewind", None))
        return self.kind == "iterable" and iter(self.data) is self.data

    def _stream(self) -> Iterator[tuple[object, str]]:
        """The raw items of one pass over the wrapped data and where each comes from."""
        d = self.data
        if self.kind == "single":
            yield d, self.name
        elif self.kind == "reader":
            if self._read and callable(getattr(d, "rewind", None)):
                d.rewind()
            self._read = True
            i = 0
            while True:
                item = d.get_next()
                if item is None:
                    return
                yield item, f"{self.name}.get_next() call {i}"
                i += 1
        elif self.kind == "callable":
            try:
                it = d()
            except TypeError as e:
                raise CalibrationDataError(f"{self.name}: calling it with no arguments failed ({e}); give a "
                                           "function that takes none and returns an iterator of samples") from None
            if not isinstance(it, Iterable):
                raise CalibrationDataError(f"{self.name}() returned a {type(it).__name__}, not an iterator of samples")
            for i, item in enumerate(it):
                yield item, f"{self.name}() item {i}"
        elif self.kind == "dataset":
            for i in range(len(d)):  # read by index, one item at a time
                yield d[i], f"{self.name} item {i}"
        else:
            unit = "batch" if self.name == "DataLoader" else "item"
            for i, item in enumerate(d):
                yield item, f"{self.name} {unit} {i}"

    def items(self, graph: Graph) -> Iterator[tuple[object, str]]:
        """``(array or {input: array}, where)`` for one pass over the source (labels kept aside)."""
        self._labels = []
        if not self.one_pass:
            for raw, where in self._stream():
                item, label = split_item(raw, graph, where)
                self._keep_label(label)
                yield item, where
            return
        for item, where, label in list(self._cache):  # what earlier passes kept, then the stream goes on
            self._keep_label(label)
            yield item, where
        if self._consumed > len(self._cache):
            raise CalibrationDataError(
                f"{self.name} is a one-pass source (a generator, an iterator or a reader without rewind()) and was "
                f"read already; intq kept its first {self._cached_samples} samples and this pass needs more: give a "
                "list, a DataLoader, or a function returning a new iterator")
        if self._live is None:
            self._live = self._stream()
        while not self._exhausted:
            try:
                raw, where = next(self._live)
            except StopIteration:
                self._exhausted = True
                return
            self._consumed += 1
            item, label = split_item(raw, graph, where)
            if self._cached_samples < self.keep and self._consumed == len(self._cache) + 1:
                self._cache.append((item, where, label))
                self._cached_samples += _samples(item, graph)
            self._keep_label(label)
            yield item, where

    def _keep_label(self, label) -> None:
        if label is not None:
            self._labels.append(label)

    def labels(self) -> np.ndarray | None:
        """The labels the last pass carried (``y`` of ``(x, y)`` items, a ``label`` key), in order,
        as one flat array; None when it carried none."""
        if not self._labels:
            return None
        return np.concatenate([np.asarray(v).reshape(-1) for v in self._labels])

    def __len__(self) -> int:  # noqa: D105 (sized only when the wrapped data is: count() uses it)
        n = count(self.data)
        if n is None:
            raise TypeError(f"{self.name} has no known length")
        return n

    def __repr__(self) -> str:
        return f"Source({self.name})"


def _kind(data) -> str:
    if isinstance(data, (np.ndarray, Mapping)) or _is_tensor(data):
        return "single"
    get_next = getattr(data, "get_next", None)
    if callable(get_next):
        return "reader"
    if isinstance(data, Iterable):
        return "iterable"
    if hasattr(data, "__len__") and hasattr(data, "__getitem__"):  # a map-style dataset (a torch Dataset)
        return "dataset"
    if callable(data):
        return "callable"
    raise CalibrationDataError(
        f"calibration data must be arrays, dicts, (x, y) pairs, a DataLoader, a dataset (__len__ and __getitem__), "
        f"an object with get_next(), a function returning an iterator, a folder or a .npy/.npz file; "
        f"got a {type(data).__name__}")


def _name(data, kind: str) -> str:
    cls = type(data).__name__
    if kind == "single":
        return "data"
    if kind == "callable":
        return getattr(data, "__name__", cls)
    if kind == "reader":
        return cls
    if cls == "DataLoader":
        return "DataLoader"
    return {"generator": "generator", "list": "list", "tuple": "tuple"}.get(cls, cls)


def split_item(raw, graph: Graph, where: str) -> tuple[object, object]:
    """One raw item as ``(sample, label)``: ``sample`` an array or ``{input: array}`` (tensors
    converted), ``label`` the ``y`` of a pair or a label key, or None. See the module docstring."""
    inputs = list(graph.inputs)
    n = len(inputs)
    if isinstance(raw, Mapping):
        label = None
        sample = {}
        for k, v in raw.items():
            if k not in inputs and str(k).lower() in LABEL_KEYS:
                label = to_array(v, f"{where}: key {k!r}")
            else:
                sample[k] = to_array(v, f"{where}: input {k!r}")
        return sample, label
    if isinstance(raw, (list, tuple)) and not _numeric_list(raw):
        m = len(raw)
        if m == n and n > 1 and all(is_array_like(v) for v in raw):
            return {name: to_array(v, f"{where}: input {name!r}") for name, v in zip(inputs, raw)}, None
        if m == 1:
            return split_item(raw[0], graph, where)
        if m == n + 1 and (n > 1 or m == 2):
            x = raw[0] if n == 1 else list(raw[:n])
            sample, _ = split_item(x, graph, where) if n == 1 else split_item(tuple(x), graph, where)
            return sample, to_array(raw[-1], f"{where}: label (the y of an (x, y) pair)")
        if m == 2 and isinstance(raw[0], (Mapping, list, tuple)):
            sample, _ = split_item(raw[0], graph, where)
            return sample, to_array(raw[1], f"{where}: label (the y of an (x, y) pair)")
        raise CalibrationDataError(
            f"{where}: a {type(raw).__name__} of {m} elements; the model takes {n} input(s) {inputs}: give arrays, "
            f"dicts {{input name: array}}, one array per input in a list, or (x, y) pairs")
    if not is_array_like(raw):
        raise CalibrationDataError(f"{where}: a {type(raw).__name__}; the model takes input(s) {inputs}: give "
                                   "arrays, dicts {input name: array}, or (x, y) pairs")
    return to_array(raw, where), None


def _numeric_list(raw) -> bool:
    """A (nested) list of plain numbers: one array written as a list, not a tuple of arrays."""
    return len(raw) > 0 and all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in raw)


def _samples(item, graph: Graph) -> int:
    """Samples in one item along the first input's batch axis (1 when there is none)."""
    name = graph.inputs[0]
    a = item.get(name) if isinstance(item, Mapping) else item
    shape = graph.tensors[name].shape
    if a is None or shape is None or not has_batch_axis(graph) or np.ndim(a) != len(shape):
        return 1
    b = shape[0] if shape[0] else 1
    return max(int(np.shape(a)[0]) // b, 1)


def source(data, keep: int = 0):
    """``data`` as a :class:`Source` when it is in memory, unchanged when it is a path."""
    if isinstance(data, (str, Path)):
        return data
    return Source(data, keep)


# ------------------------------------------------------------------------------- counting


def expected_total(data, graph: Graph, limit: int | None = None, total: int | None = None) -> int | None:
    """The samples a pass over ``data`` will run, for a progress ETA: ``total`` when the caller
    knows it, else :func:`count` (None when that is not cheap to tell), at most ``limit``."""
    if total is None:
        total = count(data, graph)
    if limit is not None:
        total = limit if total is None else min(total, limit)
    return total


def count(data, graph: Graph | None = None) -> int | None:
    """How many samples ``data`` holds when that is cheap to tell (nothing is decoded), else None:
    a folder of images holds one per image; an .npy/.npz file its first axis over the input's
    batch; a sized in-memory source its length (a list of batches: times the first one's samples;
    a DataLoader: its dataset's length)."""
    if isinstance(data, Source):
        data = data.data
    if isinstance(data, (str, Path)):
        return _count_files(Path(data), graph) if graph is not None else None
    if isinstance(data, (np.ndarray, Mapping)) or _is_tensor(data):
        return None
    dataset = getattr(data, "dataset", None)
    if type(data).__name__ == "DataLoader" and dataset is not None:
        try:
            return len(dataset)
        except (TypeError, NotImplementedError):
            return None
    try:
        n = len(data)
    except (TypeError, NotImplementedError, AttributeError):  # onnxruntime's reader raises NotImplementedError
        return None
    if graph is not None and isinstance(data, Sequence) and n:
        try:
            first, _ = split_item(data[0], graph, "item 0")
            return n * _samples(first, graph)
        except (IntqError, IndexError, KeyError, TypeError):
            return n
    return n


def _count_files(p: Path, graph: Graph) -> int | None:
    if p.is_dir():
        try:
            files = [f.suffix.lower() for f in p.iterdir()]
        except OSError:
            return None
        if any(f in ARRAY_SUFFIXES for f in files):
            return None
        return sum(f in IMAGE_SUFFIXES for f in files) or None
    shape = graph.tensors[graph.inputs[0]].shape
    batch = shape[0] if shape and isinstance(shape[0], int) and shape[0] > 0 else None
    if batch is None or p.suffix.lower() not in ARRAY_SUFFIXES or not p.is_file():
        return None
    try:
        headers = array_headers(p)  # the headers only: nothing is loaded here
    except IntqError:  # the real pass reports the error with its context
        return None
    first = headers.get(graph.inputs[0], headers.get("")) or (next(iter(headers.values())) if headers else None)
    if first is None or not first[0]:
        return None
    return max(first[0][0] // batch, 1)


# ------------------------------------------------------------------------------- shapes from data


def first_arrays(data, names: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """The shape of each input's array in the first item of ``data`` (a path: from the file
    headers; in memory: the first item, kept for the next pass of a one-pass :class:`Source`),
    for the inputs ``names`` in the model's order; inputs the item does not name are left out."""
    if isinstance(data, (str, Path)):
        return _first_file_shapes(Path(data), names)
    src = data if isinstance(data, Source) else Source(data)
    graph = _names_graph(names)
    if src.one_pass:
        src.keep = max(src.keep, 1)  # the peeked item is kept: the next pass replays it
    for item, _ in src.items(graph):
        return _shapes(item, names)
    return {}


def _names_graph(names: Sequence[str]) -> Graph:
    """A graph with only these inputs (shapes unknown): what :func:`split_item` needs to pair lists with inputs."""
    from intq.ir import Tensor

    return Graph(name="inputs", tensors={n: Tensor(n, np.dtype(np.float32), None) for n in names}, nodes=[],
                 inputs=list(names), outputs=list(names))


def _shapes(item, names: Sequence[str]) -> dict[str, tuple[int, ...]]:
    if isinstance(item, Mapping):
        return {k: tuple(np.shape(v)) for k, v in item.items() if k in names}
    return {names[0]: tuple(np.shape(item))} if len(names) == 1 else {}


def _first_file_shapes(p: Path, names: Sequence[str]) -> dict[str, tuple[int, ...]]:
    if p.is_dir():
        try:
            files = sorted(f for f in p.iterdir() if f.suffix.lower() in ARRAY_SUFFIXES)
        except OSError:
            return {}
        if not files:
            return {}
        p = files[0]
    if p.suffix.lower() not in ARRAY_SUFFIXES or not p.is_file():
        return {}
    try:
        headers = array_headers(p)
    except IntqError:
        return {}
    if "" in headers or (len(headers) == 1 and len(names) == 1 and names[0] not in headers):
        return {names[0]: tuple(next(iter(headers.values()))[0])} if len(names) == 1 else {}
    return {k: tuple(v[0]) for k, v in headers.items() if k in names}


def input_shapes_from_data(data, declared: Mapping[str, Sequence[int | None] | None],
                           given: Mapping[str, Sequence[int]] | None = None) -> dict[str, tuple[int, ...]]:
    """Shapes binding each input's dynamic dimensions (``declared``: None per dynamic dim) from the
    first sample of ``data``: the batch (dimension 0 of an input of rank >= 2) as 1 (the
    interpreter runs any batch, and the data is split into samples of batch 1), every other
    dynamic dimension the data's size. Inputs ``given`` already, fully static ones and ones the data
    does not show (or shows with another rank) are left out."""
    given = dict(given or {})
    wanted = [n for n, dims in declared.items() if n not in given and dims is not None and any(d is None for d in dims)]
    if not wanted:
        return {}
    shapes = first_arrays(data, list(declared))
    out = {}
    for name in wanted:
        dims, have = list(declared[name]), shapes.get(name)
        if have is None:
            continue
        if len(have) == len(dims) - 1 and len(dims) >= 2 and dims[0] is None:  # one sample without its batch axis
            have = (1, *have)
        if len(have) != len(dims) or any(d is not None and d != h for d, h in zip(dims[1:], have[1:])):
            continue
        out[name] = tuple(1 if i == 0 and len(dims) >= 2 and d is None else (h if d is None else d)
                          for i, (d, h) in enumerate(zip(dims, have)))
    return out


__all__ = ["Source", "source", "split_item", "to_array", "count", "first_arrays", "input_shapes_from_data",
           "LABEL_KEYS", "is_array_like"]
