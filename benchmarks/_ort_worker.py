"""Run ONNX models in onnxruntime on many inputs and save the outputs: what benchmarks/onnx_export.py
``--avx2`` starts under ``qemu-x86_64 -cpu Haswell`` (so that MLAS takes its AVX2 kernels: QEMU user
mode runs this process on an emulated CPU without VNNI; a child process would run natively, so this
is the process that calls onnxruntime). Imports only numpy and onnxruntime (and intq/host.py alone,
for the probe of the U8S8 arithmetic onnxruntime takes here).

    python benchmarks/_ort_worker.py MODELS.npz OUTPUTS.npz

``MODELS.npz``: ``model:<tag>`` (the file's bytes as uint8), ``inputs`` (float32 ``[N, ...]``, each
``inputs[k:k+1]`` one feed of the models' single input). ``OUTPUTS.npz``: ``out:<tag>`` (the first
output per input, stacked), ``refused:<tag>`` (onnxruntime's message when it refuses the file) and
``arithmetic`` (``"pair-saturating"`` / ``"exact"``: :func:`intq.host._probe_u8s8` in this process).
One thread, ORT_ENABLE_ALL (onnxruntime's default).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort


def main(src: str, dst: str) -> None:
    d = np.load(src, allow_pickle=False)
    xs = d["inputs"]
    out = {}
    for key in sorted(k for k in d.files if k.startswith("model:")):
        tag = key[len("model:"):]
        o = ort.SessionOptions()
        o.intra_op_num_threads = o.inter_op_num_threads = 1
        o.log_severity_level = 3
        try:
            s = ort.InferenceSession(d[key].tobytes(), o, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001  (reported by the caller, as onnx_export.py does natively)
            out[f"refused:{tag}"] = np.array(str(e).splitlines()[0][:300])
            continue
        name = s.get_inputs()[0].name
        out[f"out:{tag}"] = np.stack([s.run(None, {name: xs[k:k + 1]})[0] for k in range(len(xs))])
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("intq_host", root / "intq" / "host.py")
    host = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    out["arithmetic"] = np.array(host._probe_u8s8() or "unknown")
    np.savez(dst, **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
