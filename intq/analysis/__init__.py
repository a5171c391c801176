"""intq.analysis — where and why an integer graph departs from its float model."""

from intq.analysis.compare import Report, TensorDetail, TensorStats, compare
from intq.analysis.html_report import render_html, weight_ranges, write_html_report

__all__ = ["compare", "Report", "TensorStats", "TensorDetail", "write_html_report", "render_html", "weight_ranges"]
