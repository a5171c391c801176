"""The `intq` command tried as a new user would, on real architectures; prints docs/results.md rows.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python tools/cli_results.py [--workdir out/cli_results]

What it does, with nothing downloaded:

1. exports ONNX files from the PyTorch definitions in ``intq.testing.torch_models`` (MobileNetV2,
   ResNet-18, the YOLO-style detector; random weights, seed 0) and uses the bundled digits CNN;
2. writes folders of JPEG images: random crops of the two photographs scikit-learn ships
   (``sklearn.datasets.load_sample_images``), 64 for calibration and 32 for evaluation; the digits
   model gets ``.npz`` files of the scikit-learn digits (200 training / 450 held-out, with labels);
3. runs the console script exactly as documented: ``intq quantize`` (``--json`` gives the time
   per stage), ``intq eval`` (top-1 agreement, output SQNR, accuracy for digits) and
   ``intq compare --html`` (per-tensor SQNR, worst layer), each in a subprocess, and times them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
INTQ = str(Path(sys.executable).parent / "intq")
IMAGENET = ["--mean", "0.485", "0.456", "0.406", "--std", "0.229", "0.224", "0.225"]


def image_folder(folder: Path, count: int, size: int, seed: int) -> None:
    """``count`` random crops (``size`` x ``size``, random scale) of scikit-learn's two photographs."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    folder.mkdir(parents=True, exist_ok=True)
    photos = load_sample_images().images  # two 427x640 RGB photographs
    rng = np.random.default_rng(seed)
    for i in range(count):
        img = photos[i % len(photos)]
        side = int(rng.integers(size // 2, min(img.shape[:2])))
        y, x = (int(rng.integers(0, img.shape[k] - side + 1)) for k in (0, 1))
        crop = Image.fromarray(img[y:y + side, x:x + side]).resize((size, size), Image.BILINEAR)
        crop.save(folder / f"img_{i:03d}.jpg", quality=92)


def export_onnx(arch: str, size: int, path: Path) -> None:
    import torch

    from intq.testing.torch_models import build

    model = build(arch, seed=0)
    torch.onnx.export(model, torch.zeros(1, 3, size, size), str(path), input_names=["input"],
                      opset_version=17, dynamo=False)


def intq(*args) -> tuple[dict, float]:
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    t = time.perf_counter()
    r = subprocess.run([INTQ, *args, "--json"], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"intq {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return json.loads(r.stdout), seconds


def run_model(name: str, model: Path, calib: Path, data: Path, shape: str, work: Path, extra=(), labels=None):
    q = work / f"{name}_int8.tflite"
    quant, t_q = intq("quantize", str(model), "--calib", str(calib), "--input-shape", shape, "-o", str(q),
                      "--force", *extra)
    ev_args = ["eval", str(model), str(q), "--data", str(data), "--input-shape", shape, *extra]
    if labels:
        ev_args += ["--labels", str(labels)]
    ev, t_e = intq(*ev_args)
    cmp, t_c = intq("compare", str(model), str(q), "--data", str(data), "--input-shape", shape, "--limit", "8",
                    "--html", str(work / f"{name}_report.html"), "--force", *extra)
    return {"name": name, "quantize": quant, "eval": ev, "compare": cmp,
            "wall": {"quantize": t_q, "eval": t_e, "compare": t_c}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=str(ROOT / "out" / "cli_results"))
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)

    from intq.testing.digits import load_split

    (xtr, _), (xte, yte) = load_split()
    np.savez(work / "digits_calib.npz", image=xtr[:200])
    np.savez(work / "digits_test.npz", image=xte)
    np.save(work / "digits_labels.npy", yte)
    results = [run_model("digits", ROOT / "intq" / "data" / "digits_cnn.onnx", work / "digits_calib.npz",
                         work / "digits_test.npz", "image=1x1x8x8", work, labels=work / "digits_labels.npy")]
    for arch, size in [("mobilenet_v2", 224), ("resnet18", 224), ("tiny_yolo", 256)]:
        onnx_path = work / f"{arch}.onnx"
        if not onnx_path.exists():
            export_onnx(arch, size, onnx_path)
        calib, data = work / f"images{size}_calib", work / f"images{size}_eval"
        if not calib.exists():
            image_folder(calib, 64, size, seed=1)
            image_folder(data, 32, size, seed=2)
        results.append(run_model(arch, onnx_path, calib, data, f"input=1x3x{size}x{size}", work,
                                 extra=["--size", str(size), str(size), *IMAGENET]))

    print("| model | calib | quantize: load / calibrate / convert / check (s) | .tflite | eval samples "
          "| top-1 agreement | output SQNR | accuracy float → int8 | worst tensor (SQNR) | wall: quantize / eval / compare (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        q, e, c = r["quantize"], r["eval"], r["compare"]
        s = q["seconds"]
        out = e["outputs"][0]
        agree = "" if out["top1_agreement"] is None else f"{100 * out['top1_agreement']:.2f}%"
        acc = "" if e["float_accuracy"] is None else \
            f"{100 * e['float_accuracy']:.2f}% → {100 * e['int_accuracy']:.2f}%"
        worst = c["layers"][0]
        sqnr = ", ".join(f"{o['sqnr_db']:.1f} dB" for o in e["outputs"])
        print(f"| {r['name']} | {q['calibration']['samples']} | {s['load']} / {s['calibrate']} / {s['convert']} / "
              f"{s['check']} | {q['bytes']:,} B | {e['samples']} | {agree} | {sqnr} | {acc} | "
              f"{worst['op']} {worst['sqnr_db']} dB | {r['wall']['quantize']:.1f} / {r['wall']['eval']:.1f} / "
              f"{r['wall']['compare']:.1f} |")
    (work / "results.json").write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
