"""The exceptions intq raises for problems a user can cause.

Every message names what is wrong (the tensor, node, file or value) and what to do about it.
Internal invariants use ``assert``; these classes are for bad input and impossible requests.
"""

from __future__ import annotations


class IntqError(Exception):
    """Base class of every error intq raises on purpose."""


class QuantizationError(IntqError, ValueError):
    """Quantization parameters cannot be chosen or applied (bad range, impossible scale)."""


class ContractError(IntqError, ValueError):
    """An arithmetic primitive was called with inputs outside its documented contract.

    The fixed-point primitives mirror C functions whose out-of-contract behaviour is undefined
    or wraps; intq raises instead of returning a silently wrong number.
    """


class GraphError(IntqError, ValueError):
    """A graph is malformed (a dangling input, a tensor written twice, a cycle, a bad shape)."""


class UnsupportedOperatorError(IntqError):
    """A model uses operators (or operator settings) intq does not implement.

    Raised once per model, listing every unsupported op type with the nodes that use it, before
    any work starts.
    """
