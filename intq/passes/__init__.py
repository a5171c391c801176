"""intq.passes — pure graph-to-graph rewrites that prepare a float graph for integer deployment.

:func:`simplify` runs the standard pipeline; each pass is also usable alone. The importer already
ran :func:`explicit_pads` (padding written out), which the pipeline's passes and readers rely on.
Shapes are inferred statically (:func:`intq.ir.shapes.infer_shapes`, no operator runs); constant
folding evaluates the nodes whose inputs are all constants with the float runtime's own operators
(:mod:`intq.runtime.float_ops`, pure numpy functions).
"""

from intq.ir import Graph
from intq.ir.shapes import infer_shapes
from intq.passes.activations import fuse_activations, recognize_activations
from intq.passes.attention import attention_masks
from intq.passes.batchnorm import fold_batch_norms
from intq.passes.cleanup import remove_identities, remove_noop_reshapes
from intq.passes.constants import div_by_constant_to_mul, fold_constants
from intq.passes.fold_affine import FOLD_AFFINE_RULES, fold_affine
from intq.passes.fold_scalars import FOLD_SCALAR_RULES, fold_scalars
from intq.passes.gelu import recognize_gelu
from intq.passes.layer_norm import decompose_layer_norms
from intq.passes.matmul_bias import MATMUL_BIAS_RULES, matmul_bias
from intq.passes.padding import explicit_pads
from intq.passes.rewrite import Const, Pattern, Replacement, Rule, apply_rules, match
from intq.passes.rnn import unroll_lstms
from intq.passes.sqrt import rsqrt_forms

#: The folds of :func:`fold_linear`: constants around linear layers become their weights and bias.
LINEAR_FOLD_RULES = FOLD_AFFINE_RULES + MATMUL_BIAS_RULES + FOLD_SCALAR_RULES


def static_shapes(graph: Graph) -> Graph:
    """Static shapes (:func:`intq.ir.shapes.infer_shapes`) and constant folding, alternated until
    nothing changes: ``Shape`` of a tensor whose shape became static folds to a constant, and so does
    the arithmetic after it, which makes the next shapes static (an exporter's ``Shape -> Gather ->
    Concat -> Reshape``). What stays unknown depends on data (NonZero of an activation)."""
    while True:
        graph = infer_shapes(graph)
        folded = fold_constants(graph)
        if folded is graph:
            return graph
        graph = folded


def fold_linear(graph: Graph) -> Graph:
    """Fold per-channel Mul/Add/Sub after linear layers (:mod:`~intq.passes.fold_affine`),
    MatMul + Add into Gemm (:mod:`~intq.passes.matmul_bias`) and scalar Muls before linear layers
    (:mod:`~intq.passes.fold_scalars`) until nothing changes; shapes re-inferred after each pass
    (the folds read the output shapes)."""
    while True:
        folded = apply_rules(graph, LINEAR_FOLD_RULES)
        if folded is graph:
            return graph
        graph = infer_shapes(folded)


def simplify(graph: Graph, *, fuse: bool = True, fold: bool = True) -> Graph:
    """The standard pipeline, in order: static shapes with constant folding (shape arithmetic
    included; :func:`static_shapes`), LSTMs unrolled into their steps, attention masks and their
    index arithmetic (:func:`attention_masks`: ``Softmax(S + mask)`` becomes ``MaskedSoftmax``),
    Identity/Dropout and no-op reshape removal, LayerNormalization written out
    (:func:`decompose_layer_norms`), Div-by-constant to Mul, ``a / sqrt(b)`` to ``a * rsqrt(b)``,
    GELU recognition (:func:`recognize_gelu`), BatchNorm folding, HardSwish / SiLU recognition,
    (``fold=True``) folding of constants around linear layers (:func:`fold_linear`: per-channel
    Mul/Add/Sub after a Conv, ConvTranspose, Gemm or MatMul, e.g. a squeeze-excite export's
    bias-less Conv + Add, become its weights and bias), and (``fuse=True``) activation fusion;
    shapes are re-inferred at the end. Recognition runs before folding: the 1/6 of
    ``x * relu6(x + 3) / 6`` must become a HardSwish, not a weight scale of the next layer. A shape
    that depends on data stays unknown here (:func:`intq.pipeline.load_float` measures it)."""
    g = attention_masks(unroll_lstms(static_shapes(graph)))
    g = decompose_layer_norms(remove_noop_reshapes(remove_identities(g)))
    g = recognize_gelu(rsqrt_forms(div_by_constant_to_mul(g)))
    g = fold_batch_norms(g)
    g = recognize_activations(g)
    if fold:
        g = fold_linear(g)
    if fuse:
        g = fuse_activations(g)
    return infer_shapes(g)


__all__ = [
    "simplify",
    "static_shapes",
    "fold_constants",
    "remove_identities",
    "remove_noop_reshapes",
    "div_by_constant_to_mul",
    "rsqrt_forms",
    "attention_masks",
    "decompose_layer_norms",
    "recognize_gelu",
    "unroll_lstms",
    "explicit_pads",
    "fold_batch_norms",
    "fold_linear",
    "fold_affine",
    "fold_scalars",
    "matmul_bias",
    "Replacement",
    "recognize_activations",
    "fuse_activations",
    "Pattern",
    "Const",
    "Rule",
    "apply_rules",
    "match",
]
