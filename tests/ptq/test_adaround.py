"""AdaRound: on a layer it lowers the output error below round-to-nearest's with every weight at
floor or ceil; on a real model the converter keeps exactly the integers it chose, the output gets
closer to float, and quantize(adaround=True) says so from held-out calibration samples."""

import numpy as np

import intq
from intq.passes import simplify
from intq.ptq import adaround
from intq.ptq.adaround import output_error, round_adaptively
from intq.testing.digits import load_split

RNG = np.random.default_rng(5)


def test_adaptive_rounding_beats_nearest_on_correlated_inputs():
    k, c_out = 24, 8
    mix = RNG.normal(0, 1, (k, k))
    x = RNG.normal(0, 1, (4000, k)) @ mix  # strongly correlated inputs: nearest is far from optimal
    cov = (x.T @ x / len(x))[None]
    w = RNG.normal(0, 1, (1, c_out, k))
    s = np.abs(w).max(axis=2, keepdims=True) / 127 * 8  # coarse grid: rounding errors matter
    q = round_adaptively(w, s, cov, iters=600)
    ratio = w / s
    assert np.all((q == np.clip(np.floor(ratio), -127, 127)) | (q == np.clip(np.ceil(ratio), -127, 127)))
    nearest = np.clip(np.round(ratio), -127, 127)
    assert np.mean(q != nearest) > 0.05  # it does choose differently
    assert output_error(w, s * q, cov) < 0.7 * output_error(w, s * nearest, cov)


def test_adaround_weights_survive_conversion_and_bring_the_digits_cnn_closer_to_float():
    (xt, _), (xv, _) = load_split()
    fg = simplify(intq.load(str(intq.__path__[0] + "/data/digits_cnn.onnx"), input_shapes={"image": (50, 1, 8, 8)}))
    calib = [{"image": xt[i:i + 50]} for i in range(0, 100, 50)]
    ag = adaround(fg, calib, iters=300)
    changed = [n for n in ag.nodes if len(n.inputs) > 1 and n.inputs[1].endswith("/adarounded")]
    assert len(changed) >= 3
    table = intq.calibrate(fg, calib)
    q_plain, q_ada = intq.quantize(fg, table=table), intq.quantize(ag, table=table)
    for n in changed:  # the converter reproduces the chosen integers: s * q quantizes to q
        w = ag.tensors[n.inputs[1]].data
        conv = next(m for m in q_ada.nodes if m.name == n.name)
        wq = q_ada.tensors[conv.inputs[1]]
        s = np.asarray(wq.qparams.scale).reshape(-1, *([1] * (w.ndim - 1)))
        wq_nchw = np.transpose(wq.data, (0, 3, 1, 2)) if wq.data.ndim == 4 else wq.data
        assert np.array_equal(wq_nchw.astype(np.float64) * s, w.astype(np.float64)) or \
            np.max(np.abs(wq_nchw * s - w)) <= 1e-6 * np.abs(w).max()

    def db(q):
        f = intq.Interpreter(fg).run({"image": xv[:200]})["logits"].astype(np.float64)
        got = intq.Interpreter(q).run({"image": xv[:200]})["logits"].astype(np.float64)
        return 10 * np.log10(np.sum(f * f) / np.sum((f - got) ** 2))

    assert db(q_ada) > db(q_plain) + 1.0  # measured: 37.1 -> 40.6 dB (1000 iterations, 450 digits)
    # through quantize: fitted on the first half of the calibration samples, checked on the second
    notes = intq.quantize(fg, calib, adaround=True).metadata["conversion_notes"]
    assert any(n.startswith("AdaRound: output SQNR on 1 held-out") for n in notes), notes
