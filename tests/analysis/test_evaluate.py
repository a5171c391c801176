"""intq.analysis.evaluate: accuracy, agreement and output SQNR computed right, bad labels refused."""

import numpy as np
import pytest
import torch

import intq
from intq.analysis.evaluate import EvaluationError, evaluate, is_class_scores, load_labels, pair_outputs
from intq.passes import simplify


def test_class_scores_shape_rule():
    assert is_class_scores((1, 10)) and is_class_scores((4, 1, 1, 10))
    assert not is_class_scores((1, 255, 8, 8)) and not is_class_scores((10,)) and not is_class_scores((1, 1))


@pytest.fixture(scope="module")
def two_heads():
    """A classifier head [1, 5] and a detection-like head [1, 3, 4, 4] on one trunk."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
            self.fc = torch.nn.Linear(48, 5)

        def forward(self, x):
            y = torch.relu(self.conv(x))
            return self.fc(y.flatten(1)), y

    x0 = torch.randn(1, 2, 4, 4)
    fg = simplify(intq.load(Net().eval(), example_inputs=x0))
    rng = np.random.default_rng(1)
    samples = [{fg.inputs[0]: rng.standard_normal((1, 2, 4, 4)).astype(np.float32)} for _ in range(30)]
    qg = intq.quantize(fg, samples[:10])
    return fg, qg, samples


def test_figures_match_a_direct_computation(two_heads):
    fg, qg, samples = two_heads
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    (f_cls, q_cls), (f_det, q_det) = [
        (np.concatenate([fi.run(s)[fo] for s in samples]).astype(np.float64),
         np.concatenate([qi.run(s)[qo] for s in samples]).astype(np.float64))
        for fo, qo in pair_outputs(fg, qg)]
    labels = np.arange(len(samples)) % 5
    ev = evaluate(fg, qg, samples, labels, batch_size=1)  # one by one, as the direct computation
    cls, det = ev.outputs
    assert ev.samples == 30 and ev.rows == 30
    assert cls.top1_agreement == np.mean(f_cls.argmax(1) == q_cls.argmax(1))
    assert det.top1_agreement is None  # argmax over a feature map's last axis means nothing
    assert cls.sqnr_db == pytest.approx(10 * np.log10((f_cls**2).sum() / ((f_cls - q_cls) ** 2).sum()), rel=1e-12)
    assert det.max_abs_err == pytest.approx(np.abs(f_det - q_det).max(), rel=1e-12)
    assert ev.float_accuracy == np.mean(f_cls.argmax(1) == labels)
    assert ev.int_accuracy == np.mean(q_cls.argmax(1) == labels)


def test_bad_labels_are_refused(two_heads, tmp_path):
    fg, qg, samples = two_heads
    with pytest.raises(EvaluationError, match="29 labels for 30 predictions"):
        evaluate(fg, qg, samples, np.zeros(29, np.int64))
    with pytest.raises(EvaluationError, match="integer classes"):
        evaluate(fg, qg, samples, np.zeros(30))
    with pytest.raises(EvaluationError, match="empty"):
        evaluate(fg, qg, [])
    (tmp_path / "l.txt").write_text("1\n2, 3\nx\n")
    with pytest.raises(EvaluationError, match="l.txt: cannot read labels"):
        load_labels(tmp_path / "l.txt")
    (tmp_path / "ok.txt").write_text("1\n2, 3\n")
    assert load_labels(tmp_path / "ok.txt").tolist() == [1, 2, 3]
