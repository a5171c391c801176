"""The data other quantizers take, read by intq with the real classes (issue 27 item 2): a torch
``DataLoader`` of ``(x, y)`` pairs, onnxruntime's ``CalibrationDataReader``, TFLite's
``representative_dataset`` callable, torch tensors. Each must give exactly the calibration table
(and the evaluation) that the same digits as a plain list of arrays give."""

import numpy as np
import pytest

import intq
from intq.analysis.evaluate import evaluate
from intq.calibration.data import CalibrationDataError
from intq.passes import simplify
from intq.testing.digits import load_split

torch = pytest.importorskip("torch")

MODEL = "intq/data/digits_cnn.onnx"


@pytest.fixture(scope="module")
def digits():
    (x_train, y_train), (x_test, y_test) = load_split()
    fg = simplify(intq.load(MODEL))  # dynamic batch: bound to 1
    return fg, x_train[:48], y_train[:48], x_test[:40], y_test[:40]


def _ranges(table):
    return {name: tuple(map(float, r)) for name, r in table.ranges.items()}


@pytest.fixture(scope="module")
def reference(digits):
    fg, x, *_ = digits
    return _ranges(intq.calibrate(fg, [{"image": s[None]} for s in x], "minmax"))


def _dataloader(x, y, batch_size):
    from torch.utils.data import DataLoader, TensorDataset

    return DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=batch_size)


def test_a_torch_dataloader_of_pairs_calibrates_like_the_arrays(digits, reference):
    fg, x, y, *_ = digits
    loader = _dataloader(x, y, batch_size=1)  # yields [x (1, 1, 8, 8) tensor, y (1,) tensor]
    assert _ranges(intq.calibrate(fg, loader, "minmax")) == reference
    batched = _dataloader(x, y, batch_size=16)  # a batch of 16 on a batch-1 graph: split into samples
    assert _ranges(intq.calibrate(fg, batched, "minmax")) == reference


def test_onnxruntimes_calibration_data_reader(digits, reference):
    from onnxruntime.quantization import CalibrationDataReader

    fg, x, *_ = digits

    class Reader(CalibrationDataReader):  # what an onnxruntime user has already written
        def __init__(self):
            self.it = iter([{"image": s[None]} for s in x])

        def get_next(self):
            return next(self.it, None)

    assert _ranges(intq.calibrate(fg, Reader(), "minmax")) == reference


def test_tflites_representative_dataset_callable(digits, reference):
    fg, x, *_ = digits

    def representative_dataset():  # TFLiteConverter.representative_dataset: yields a list, one array per input
        for s in x:
            yield [s[None]]

    assert _ranges(intq.calibrate(fg, representative_dataset, "minmax")) == reference
    tensors = [torch.from_numpy(s[None]) for s in x]  # torch tensors where arrays go
    assert _ranges(intq.calibrate(fg, tensors, "minmax")) == reference


def test_eval_takes_its_labels_from_the_pairs(digits):
    fg, x, _, x_test, y_test = digits
    qg = intq.quantize(fg, [s[None] for s in x])
    plain = evaluate(fg, qg, [{"image": s[None]} for s in x_test], y_test)
    from_loader = evaluate(fg, qg, _dataloader(x_test, y_test, batch_size=8))
    assert plain.float_accuracy is not None
    assert (from_loader.float_accuracy, from_loader.int_accuracy) == (plain.float_accuracy, plain.int_accuracy)
    report = intq.compare(fg, qg, _dataloader(x_test, y_test, batch_size=8))
    assert report.accuracy == (plain.float_accuracy, plain.int_accuracy) and report.labelled_rows == len(y_test)


@pytest.mark.parametrize("bad, words", [
    (["not an array"], "str"),
    ([np.zeros((1, 3, 8, 8), np.float32)], "image"),
    (lambda: 5, "not an iterator"),
])
def test_a_wrong_sample_names_the_input_and_the_adapter(digits, bad, words):
    fg, *_ = digits
    with pytest.raises(CalibrationDataError) as e:
        intq.calibrate(fg, bad, "minmax")
    assert words in str(e.value), str(e.value)
