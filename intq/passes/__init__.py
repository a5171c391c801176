"""intq.passes — pure graph-to-graph rewrites that prepare a float graph for integer deployment.

:func:`simplify` runs the standard pipeline; each pass is also usable alone. The importer already
ran :func:`explicit_pads` (padding written out), which the pipeline's passes and readers rely on.
"""

from intq.ir import Graph
from intq.passes.activations import fuse_activations, recognize_activations
from intq.passes.batchnorm import fold_batch_norms
from intq.passes.cleanup import remove_identities, remove_noop_reshapes
from intq.passes.constants import div_by_constant_to_mul, fold_constants
from intq.passes.conv_bias import fold_conv_add_into_bias
from intq.passes.padding import explicit_pads
from intq.passes.rewrite import Const, Pattern, Rule, apply_rules, match
from intq.passes.rnn import unroll_lstms
from intq.passes.sqrt import rsqrt_forms


def simplify(graph: Graph, *, fuse: bool = True) -> Graph:
    """The standard pipeline, in order: static shapes, constant folding (shape arithmetic
    included), LSTMs unrolled into their steps, Identity/Dropout and no-op reshape removal,
    Div-by-constant to Mul, ``a / sqrt(b)`` to ``a * rsqrt(b)``, BatchNorm folding, per-channel Adds
    after a Conv folded into its bias, HardSwish / SiLU recognition, and (``fuse=True``) activation
    fusion; shapes are re-inferred at the end."""
    from intq.runtime.interpreter import infer_shapes

    g = unroll_lstms(fold_constants(infer_shapes(graph)))
    g = remove_noop_reshapes(remove_identities(g))
    g = rsqrt_forms(div_by_constant_to_mul(g))
    g = fold_conv_add_into_bias(fold_batch_norms(g))
    g = recognize_activations(g)
    if fuse:
        g = fuse_activations(g)
    return infer_shapes(g)


__all__ = [
    "simplify",
    "fold_constants",
    "remove_identities",
    "remove_noop_reshapes",
    "div_by_constant_to_mul",
    "rsqrt_forms",
    "unroll_lstms",
    "explicit_pads",
    "fold_batch_norms",
    "fold_conv_add_into_bias",
    "recognize_activations",
    "fuse_activations",
    "Pattern",
    "Const",
    "Rule",
    "apply_rules",
    "match",
]
