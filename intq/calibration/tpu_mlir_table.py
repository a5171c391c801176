"""TPU-MLIR's calibration table, both ways: read it into a :class:`CalibrationTable`, write one.

TPU-MLIR's ``run_calibration`` writes a text table, one line per tensor (spec 002, "threshold"
calibration)::

    # op_name    threshold    min    max
    /features/features.2/Relu_output_0_Relu 3.1896291 -0.0000000 4.4212251

``threshold`` is what its symmetric scheme quantizes with (``S = t/128``, or ``t/255`` for uint8
after a ReLU: KL divergence, then auto-tune, may clip below ``max``); ``min``/``max`` are the observed
range its asymmetric scheme uses. Names are TPU-MLIR's op names: the ONNX output tensor's name
followed by ``_<OpType>`` (``logits`` of a Gemm is ``logits_Gemm``); graph inputs keep their name.

* :func:`read_tpu_mlir_table` -> a :class:`CalibrationTable` whose ranges are the ones TPU-MLIR's
  chosen scheme quantizes with (``scheme="symmetric"``: ``[-t, t]``, ``[0, t]`` where ``min >= 0``;
  ``"asymmetric"``: ``[min, max]``), keyed by intq's tensor names when ``tensor_names`` are given;
  every column is kept in ``options["tpu_mlir"]``.
* :func:`write_tpu_mlir_table` writes any intq table in TPU-MLIR's format for the op names of a
  TPU-MLIR model (``threshold = max(|min|, |max|)``), so ``model_deploy --calibration_table`` can
  quantize with intq's ranges: one calibration drives both toolchains.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from intq.calibration.calibrate import CalibrationTable
from intq.errors import IntqError, QuantizationError

HEADER = "# op_name    threshold    min    max"


class TpuMlirTableError(QuantizationError):
    """A TPU-MLIR calibration table cannot be read or written (names the file and line)."""


def tpu_mlir_name_map(op_names: Iterable[str], tensor_names: Iterable[str]) -> dict[str, str]:
    """TPU-MLIR op name -> intq tensor name: the same name, or the name without its ``_<OpType>``
    suffix (the longest suffix-stripped prefix that is a tensor name wins). Unmatched names are left out."""
    tensors = set(tensor_names)
    out = {}
    for op in op_names:
        if op in tensors:
            out[op] = op
            continue
        base = op
        while "_" in base:
            base = base.rsplit("_", 1)[0]
            if base in tensors:
                out[op] = base
                break
    return out


def read_tpu_mlir_table(path: str | os.PathLike, tensor_names: Iterable[str] | None = None,
                        scheme: str = "symmetric") -> CalibrationTable:
    """Read TPU-MLIR's calibration table (see the module docstring).

    ``scheme``: ``"symmetric"`` (the ranges TPU-MLIR's default int8 scheme uses: ``[-t, t]``, or
    ``[0, t]`` for a tensor whose ``min >= 0``) or ``"asymmetric"`` (``[min, max]``, as
    ``model_deploy --asymmetric``). ``tensor_names``: intq's tensor names (e.g. a float graph's);
    given, the ranges are keyed by them (:func:`tpu_mlir_name_map`) and op names without a tensor are
    left out. Other sections of the file (``#int4_th``, ``#weight_scale``...) are skipped.
    """
    if scheme not in ("symmetric", "asymmetric"):
        raise TpuMlirTableError(f"scheme must be 'symmetric' or 'asymmetric', got {scheme!r}")
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise TpuMlirTableError(f"{path}: cannot read the calibration table ({e})") from None
    columns: dict[str, tuple[float, float, float]] = {}
    header: dict[str, str] = {}
    in_section = True  # the threshold section comes first; a later "#name" section header ends it
    for no, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith("#"):
            body = text.lstrip("#").strip()
            if ":" in body:
                key, _, value = body.partition(":")
                header.setdefault(key.strip(), value.strip())
            if text.startswith("#") and not text.startswith("# ") and text != "###" and body:
                in_section = False  # e.g. "#int4_th", "#weight_scale"
            continue
        if not in_section:
            continue
        parts = text.split()
        if len(parts) != 4:
            raise TpuMlirTableError(f"{path}:{no}: expected 'name threshold min max', got {text[:80]!r}")
        try:
            th, lo, hi = (float(v) for v in parts[1:])
        except ValueError:
            raise TpuMlirTableError(f"{path}:{no}: threshold, min and max must be numbers: {text[:80]!r}") from None
        if not all(math.isfinite(v) for v in (th, lo, hi)) or th < 0 or lo > hi:
            raise TpuMlirTableError(f"{path}:{no}: invalid threshold {th} or range [{lo}, {hi}] for {parts[0]!r}")
        columns[parts[0]] = (th, lo, hi)
    if not columns:
        raise TpuMlirTableError(f"{path}: no 'name threshold min max' lines")
    names = {k: k for k in columns} if tensor_names is None else tpu_mlir_name_map(columns, tensor_names)
    ranges = {}
    for op, name in names.items():
        th, lo, hi = columns[op]
        if scheme == "symmetric":
            ranges[name] = (0.0, th) if lo >= 0 else (-th, th)
        else:
            ranges[name] = (min(lo, 0.0), max(hi, 0.0))
    samples = header.get("sample number", "0")
    options = {"scheme": scheme, "source": str(path),
               "method": header.get("quantization threshold calculation method", ""),
               "tpu_mlir": {op: list(v) for op, v in columns.items()},
               "tpu_mlir_names": {op: name for op, name in names.items()}}
    try:
        return CalibrationTable("tpu-mlir", ranges, {}, int(samples) if samples.isdigit() else 0, options,
                                Path(header.get("mlir", "")).stem)
    except IntqError as e:
        raise TpuMlirTableError(f"{path}: {e}") from None


def write_tpu_mlir_table(table: CalibrationTable, path: str | os.PathLike, op_names: Iterable[str] | None = None,
                         *, overwrite: bool = False, note: str = "intq") -> int:
    """Write ``table`` as a TPU-MLIR calibration table; returns the number of lines written.

    ``op_names``: the TPU-MLIR op names to write (the ``loc`` names of its ``top`` dialect model, e.g.
    from ``model_transform``'s ``.mlir``); each takes the range of its tensor (:func:`tpu_mlir_name_map`).
    Without them the table's own names are written. ``threshold = max(|min|, |max|)``. An op with
    no range is an error naming it. An existing file is kept unless ``overwrite``.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise TpuMlirTableError(f"{path} exists; pass overwrite=True to replace it")
    if op_names is None:
        mapping = {k: k for k in table.ranges}
    else:
        op_names = list(op_names)
        mapping = tpu_mlir_name_map(op_names, table.ranges)
        missing = [op for op in op_names if op not in mapping]
        if missing:
            raise TpuMlirTableError(f"no range in the table for {len(missing)} TPU-MLIR op(s): {missing[:8]}")
    lines = [f"# generated by {note}", f"# mlir: {table.model}", f"# quantization threshold calculation method: "
             f"['{table.method}']", f"# sample number: {table.num_samples}", "###", HEADER]
    for op, name in mapping.items():
        lo, hi = table.ranges[name]
        lines.append(f"{op} {max(abs(lo), abs(hi)):.7f} {lo:.7f} {hi:.7f}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)
    return len(mapping)
