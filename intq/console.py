"""What the ``intq`` command shows on the terminal while it works: progress lines and log records.

The library never prints (DESIGN, conventions): long loops call a ``progress(Progress)`` callback
(:class:`intq.calibration.Progress`: done, total when known, elapsed, the unit) and report
through :mod:`logging` (logger ``intq.*``: conversion notes and target shortfalls are warnings,
stage timings info). This module is the command's side of both:

* :class:`ProgressLine` — one self-erasing line on stderr when it is a terminal:
  ``calibrating: 96/200 samples (48%), 21.5/s, ETA 0:05`` (``96 samples, 21.5/s`` when the total
  is unknown), redrawn at most every :data:`REDRAW_SECONDS`; nothing when stderr is not a terminal
  (a log file gets no carriage returns), with ``--quiet`` or ``--json``.
* :func:`logging_to_stderr` — while a command runs, records of the ``intq`` loggers go to stderr
  as ``intq quantize: warning: ...`` at ``--quiet`` (errors only), default (warnings), ``-v``
  (info), ``-vv`` (debug); a progress line is erased before a record is printed.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time

#: the shortest time between two redraws of a progress line (a fast loop would spend its time printing)
REDRAW_SECONDS = 0.1

_ACTIVE: list["ProgressLine"] = []  # the line on screen, erased before a log record is printed


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def describe(p, label: str) -> str:
    """The text of one progress report ``p`` (done ``p.samples``, ``p.total``, ``p.elapsed``, ``p.unit``;
    on a cluster, ``p.shards`` done of ``p.shards_total``)."""
    unit = getattr(p, "unit", "samples")
    rate = p.samples / p.elapsed if p.elapsed > 0 else 0.0
    shards = getattr(p, "shards", None)
    on = f", shards {shards}/{getattr(p, 'shards_total', None) or '?'}" if shards is not None else ""
    if p.total:
        pct = min(100.0 * p.samples / p.total, 100.0)
        eta = f", ETA {_clock(max(p.total - p.samples, 0) / rate)}" if rate > 0 and p.samples < p.total else ""
        return f"{label}: {p.samples}/{p.total} {unit} ({pct:.0f}%){on}, {rate:.1f}/s{eta}"
    return f"{label}: {p.samples} {unit}{on}, {rate:.1f}/s"


class ProgressLine:
    """A progress callback drawing one line on ``stream`` (see the module docstring); ``enabled``
    False makes it a no-op. :meth:`close` ends the line (and leaves the last report on screen)."""

    def __init__(self, label: str, enabled: bool = True, stream=None):
        self.label, self.stream = label, stream if stream is not None else sys.stderr
        self.enabled = enabled and _is_terminal(self.stream)
        self._last = 0.0
        self._text = ""

    def __call__(self, p) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        final = bool(p.total) and p.samples >= p.total
        if now - self._last < REDRAW_SECONDS and not final:
            return
        self._last = now
        self._draw(describe(p, self.label))

    def _draw(self, text: str) -> None:
        pad = " " * max(len(self._text) - len(text), 0)
        self.stream.write(f"\r{text}{pad}")
        self.stream.flush()
        self._text = text
        if self not in _ACTIVE:
            _ACTIVE.append(self)

    def erase(self) -> None:
        """Clear the line (a log record is about to be printed); the next report redraws it."""
        if self._text:
            self.stream.write("\r" + " " * len(self._text) + "\r")
            self.stream.flush()
            self._text = ""
            self._last = 0.0

    def close(self) -> None:
        """End the line: the last report stays on screen, the cursor moves to the next line."""
        if self._text:
            self.stream.write("\n")
            self.stream.flush()
            self._text = ""
        if self in _ACTIVE:
            _ACTIVE.remove(self)


def end_lines() -> None:
    """End every progress line on screen (the command prints its report next)."""
    for line in list(_ACTIVE):
        line.close()


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Handler(logging.StreamHandler):
    """stderr, a progress line erased first; ``intq quantize: warning: ...``."""

    def __init__(self, command: str):
        super().__init__(sys.stderr)
        self.command = command

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # the stream of the moment (tests redirect it)
        for line in _ACTIVE:
            line.erase()
        super().emit(record)

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname.lower()
        return f"{self.command}: {level}: {record.getMessage()}"


def level_of(quiet: bool, verbose: int) -> int:
    """``--quiet``: errors only; default: warnings; ``-v``: info; ``-vv``: debug."""
    if quiet:
        return logging.ERROR
    return {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)


@contextlib.contextmanager
def logging_to_stderr(command: str, level: int):
    """Inside the block, the ``intq`` loggers' records of ``level`` and above go to stderr in the
    command's words; the logger's previous handlers, level and propagation come back afterwards."""
    logger = logging.getLogger("intq")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    handler = _Handler(command)
    logger.handlers = [handler]
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.handlers, logger.level, logger.propagate = saved[0], saved[1], saved[2]
        end_lines()
