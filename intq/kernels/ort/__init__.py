"""The ``ort`` family: onnxruntime's CPU arithmetic (MLAS), for the ``ort`` targets
(:data:`intq.kernels.targets.TARGETS`).

What intq's ONNX export (:func:`intq.export_onnx`) makes onnxruntime compute, per operator —
read in onnxruntime's sources (MLAS ``quantize.cpp``, ``qladd.cpp``, ``logistic.cpp``,
``qlgavgpool.cpp``; ``contrib_ops/cpu/quantization/*``) and measured equal on random single-op
models (tests/kernels/test_ort_target.py) with onnxruntime 1.2x on x86-64 (AVX2, FMA3, AVX-512
VNNI; one thread; ``ORT_DISABLE_ALL`` and ``ORT_ENABLE_ALL``):

* ``QuantizeLinear``: ``clamp(rint(float32(x / s)) + Z)`` — a float32 division, half to even
  (:func:`quantize_linear`, which is :func:`intq.qmath.quantize` with ``Rounding.HALF_TO_EVEN``);
  NaN becomes the lowest code (MLAS's ``max(x, qmin - Z)`` returns its second operand for NaN;
  measured on lengths 1 to 65, vector body and scalar tail alike).
* ``DequantizeLinear``: ``float32(q - Z) * s`` in float32 — one rounding, what
  :func:`intq.qmath.dequantize` computes (the reference DEQUANTIZE kernel runs unchanged).
* ``QLinearConv`` / ``QGemm``: ``rint(float32(acc + bias) * float32(float32(s_x s_w) / s_y)) + Z``,
  clamped: :data:`~intq.kernels.targets.Requant.FLOAT32_RNE` with the scale of
  :func:`intq.kernels.requantize.float32_rne_scale` (the same float32 expression): the target's
  requantization contract, which the reference kernels read; only weights with a zero point
  (:mod:`intq.kernels.ort.gemm`) need a variant.
* ``QLinearAdd`` (MLAS's AVX2 kernel, taken on this CPU): ``rint(fma(a, r_a, fma(b, r_b, F)))``
  with ``r_a = float32(s_a / s_y)``, ``r_b = float32(s_b / s_y)``,
  ``F = float32(Z_y - fma(r_a, Z_a, float32(r_b Z_b)))`` on the raw codes ``a``, ``b`` (so uint8
  codes round differently from int8 ones on a few inputs: ``ort-u8``). The wheel's compiler
  contracts the source's ``r_a Z_a + r_b Z_b`` and the broadcast kernel's ``F + b r_b`` into fmas
  (measured); a broadcast input is MLAS's ``B``, so a scalar ``a`` swaps the roles
  (:func:`intq.kernels.ort.add.add_scalar_input`).
* ``QLinearMul``: ``rint(float32(float32((a - Z_a)(b - Z_b)) * r) + float32(Z_y))`` with
  ``r = float32(float32(s_a s_b) / s_y)`` (the zero point is added before rounding).
* ``QLinearSigmoid``, ``QLinearLeakyRelu`` and the float islands intq writes as
  ``DequantizeLinear -> op -> QuantizeLinear`` (HardSwish, Relu, Clip, and a requantizing
  QUANTIZE): onnxruntime builds (or computes) ``QuantizeLinear(f(DequantizeLinear(q)))`` per code,
  with MLAS's logistic (:mod:`intq.kernels.ort.logistic`), ``x >= 0 ? x : float32(x alpha)``, and
  ``x * clamp(float32(x / 6... ))`` (:mod:`intq.kernels.ort.hard_swish`).
* ``QLinearGlobalAveragePool`` (channels last): ``rint(float32(sum - N Z_x) * float32(s_x /
  float32(s_y N))) + Z_y`` — the float32 requantization with that scale (MEAN over any axes).
* ``QLinearConcat``: each input through ``QuantizeLinear(DequantizeLinear(q))`` (a per-code table).
* ``DequantizeLinear -> Sqrt -> Reciprocal -> QuantizeLinear`` (RSQRT): ``float32(1 / sqrt(x))``
  per code (both IEEE operations, correctly rounded in float32; :mod:`intq.kernels.ort.rsqrt`).

Because every one of these but the convolutions depends only on the input codes, ``prepare``
evaluates the formula on all 256 codes (65536 pairs for ADD and MUL) in float32, and ``run`` is a
table lookup: integer-only, as DESIGN decision 3 asks. Tables are indexed by the int8 code's bits
(``x.view(np.uint8)``); values are intq's int8 codes (onnxruntime's uint8 codes minus 128 on
``ort-u8``).

One module per operator registers its variant (:func:`intq.kernels.base.variant`, family
:data:`FAMILY`); :mod:`~intq.kernels.ort.common` holds the shared formulas and tables. Family
:data:`U8S8_AVX2` (target ``ort-u8s8-avx2``, before ``ort``) is MLAS's AVX2 uint8 x int8 GEMM without
VNNI (:mod:`intq.kernels.ort.u8s8`). The uint8 targets' codes are intq's plus 128
(:attr:`intq.kernels.targets.Target.activation_offset`). Operators with no variant here run the
reference kernels with the target's contract (float32 requantization where they requantize) and
rules (LiteRT's acceptance tables).
"""

FAMILY = "ort"
U8S8_AVX2 = "ort_u8s8_avx2"
