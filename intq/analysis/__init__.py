"""intq.analysis — where and why an integer graph departs from its float model."""

from intq.analysis.compare import Report, TensorStats, compare

__all__ = ["compare", "Report", "TensorStats"]
