"""The error intq.qat raises for problems a user can cause."""

from __future__ import annotations

from intq.errors import IntqError


class QATError(IntqError, ValueError):
    """Quantization-aware training cannot prepare, run or convert a model (names the node and the fix)."""
