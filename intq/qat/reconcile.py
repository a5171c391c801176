""":func:`intq.calibration.reconcile_ranges` as a per-step-cheap map, learned from the function itself.

Reconciliation only copies ranges between tensors and takes unions (ReLU backward, concat union,
pass-through forward: :mod:`intq.calibration.reconcile`), so every reconciled range is
``(min of lo over a set of tensors, max of hi over another set)``. :class:`RangeReconciler` finds
those sets by probing ``reconcile_ranges`` once (every range ``[-1, 1]``, then one tensor's bound
moved at a time), checks the learned map against the real function on random tables, and from
then on reconciles a whole step's ranges with two masked reductions instead of building a
calibration table and walking the graph. Should a future rule not be a min/max of ranges, the
check fails and the real function is called every time — the rules stay in one place.
"""

from __future__ import annotations

import numpy as np

from intq.calibration import CalibrationTable, reconcile_ranges
from intq.ir import Graph

CHECK_SEED = 7  # the random tables the learned map is checked on
MAX_PROBED = 400  # beyond this many tensors, probing costs more than it saves: call the function


class RangeReconciler:
    """Reconcile ranges of ``names`` (tensors of ``graph``) given as ``lo``, ``hi`` arrays."""

    def __init__(self, graph: Graph, names: list[str]):
        self.graph = graph
        self.names = list(names)
        n = len(self.names)
        self.learned = False
        if n == 0 or n > MAX_PROBED:
            return
        ones = np.ones(n)
        base_lo, base_hi = self._call(-ones, ones)
        if not (np.all(base_lo == -1) and np.all(base_hi == 1)):
            return
        lo_src = np.zeros((n, n), bool)
        hi_src = np.zeros((n, n), bool)
        for j in range(n):
            lo = -ones.copy()
            lo[j] = -2.0
            hi = ones.copy()
            hi[j] = 2.0
            r_lo, r_hi = self._call(lo, hi)
            lo_src[:, j] = r_lo == -2.0
            hi_src[:, j] = r_hi == 2.0
        if not (lo_src.any(1).all() and hi_src.any(1).all()):
            return
        self.lo_src, self.hi_src = lo_src, hi_src
        rng = np.random.default_rng(CHECK_SEED)
        for _ in range(3):
            lo = -rng.uniform(0.01, 5.0, n)
            hi = rng.uniform(0.01, 5.0, n)
            want = self._call(lo, hi)
            self.learned = True
            got = self(lo, hi)
            if not (np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])):
                self.learned = False
                return

    def _call(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        table = reconcile_ranges(self.graph, CalibrationTable("qat", dict(zip(self.names, zip(lo, hi)))))
        return (np.array([table[n][0] for n in self.names]), np.array([table[n][1] for n in self.names]))

    def __call__(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The reconciled ``(lo, hi)`` (what ``reconcile_ranges`` gives for these ranges)."""
        if not self.learned:
            return self._call(lo, hi)
        return (np.where(self.lo_src, lo[None, :], np.inf).min(1), np.where(self.hi_src, hi[None, :], -np.inf).max(1))
