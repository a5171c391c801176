"""Writing a user's files: every file intq writes goes through here.

A user's files are sacred (DESIGN, conventions): nothing is overwritten unless asked, no output
replaces an input, and nothing is left half-written. Three tools keep those promises:

* :func:`check_outputs` — before any work: refuse an output that is the same file as an input or
  as another output (by resolved path, or by inode for existing files: hard links and symlinks
  included), an existing output without ``overwrite``, an output that is a folder, or one whose
  folder cannot exist (a regular file on the way).
* :func:`write_file` — one atomic write: the data goes to a temporary file with a unique name
  (:func:`tempfile.mkstemp`: never an existing file's name) in the output's own folder, is flushed
  to disk, then renamed over the output (``os.replace``: a reader sees the old file or the new one,
  never a partial one). Without ``overwrite`` the rename cannot replace a file created meanwhile
  (``os.link`` refuses an existing name). On any failure — ``KeyboardInterrupt`` included — the
  temporary file is removed and the output is untouched.
* :class:`StagedOutputs` — a command's outputs as one transaction: :meth:`~StagedOutputs.stage`
  writes each to its temporary file at once, :meth:`~StagedOutputs.commit` renames them all into
  place at the end (with SIGINT/SIGTERM held back for the few renames),
  :meth:`~StagedOutputs.discard` removes them. The ``intq`` command commits only when the whole
  command succeeded, so a failure or Ctrl-C leaves nothing written and every existing file as it was.

Temporary files are named ``.<output name>.<random>.intq-tmp`` (:data:`TEMP_SUFFIX`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from intq.errors import IntqError

#: The suffix of every temporary file intq creates next to an output.
TEMP_SUFFIX = ".intq-tmp"

PathLike = str | os.PathLike


class OutputPathError(IntqError, ValueError):
    """An output path is refused: it exists (and overwriting was not asked), it is an input or
    another output, it is a folder, or its folder cannot be created."""


def same_file(a: PathLike, b: PathLike) -> bool:
    """True when ``a`` and ``b`` name the same file or folder: equal resolved paths (symlinks
    followed, ``..`` removed), or, both existing, the same inode (hard links)."""
    try:
        if os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(outputs: Mapping[str, PathLike | None], inputs: Mapping[str, PathLike | None] | None = None,
                  *, overwrite: bool = False, force_flag: str = "--force") -> dict[str, Path]:
    """Check every output path before any work; return them as ``{label: Path}`` (None entries dropped).

    ``outputs`` and ``inputs`` map a label the user recognises (``"-o"``, ``"--calib-table"``,
    ``"MODEL"``) to a path. Raises :class:`OutputPathError` naming the label and the path when an
    output is an input or another output, exists while ``overwrite`` is false (the message names
    ``force_flag``), is a folder, or has a non-folder on its way. Missing folders are fine:
    :func:`write_file` creates them.
    """
    outs = {label: Path(os.fspath(p)) for label, p in outputs.items() if p is not None and os.fspath(p) != ""}
    ins = {label: Path(os.fspath(p)) for label, p in (inputs or {}).items() if p is not None and os.fspath(p) != ""}
    labels = list(outs)
    for k, label in enumerate(labels):
        path = outs[label]
        for in_label, in_path in ins.items():
            if same_file(path, in_path):
                raise OutputPathError(f"{label} {path} is also the input {in_label} {in_path}; intq never writes "
                                      "over its inputs: choose another output path")
        for other in labels[:k]:
            if same_file(path, outs[other]):
                raise OutputPathError(f"{label} {path} and {other} {outs[other]} are the same file; give each "
                                      "output its own path")
        if path.is_dir():
            raise OutputPathError(f"{label} {path} is a folder; give a file name")
        if os.path.lexists(path) and not overwrite:
            raise OutputPathError(f"{label} {path} exists; pass {force_flag} to overwrite it")
        parent = _existing_ancestor(path.parent)
        if not parent.is_dir():
            raise OutputPathError(f"{label} {path}: {parent} is not a folder")
    return outs


def _existing_ancestor(folder: Path) -> Path:
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    return folder


def _mode_for(path: Path) -> int:
    """The permission bits a new file gets: the existing file's when replacing one, else 0o666
    less the process umask (what ``open(path, "w")`` would give)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _temp_for(path: Path, data: bytes) -> Path:
    """Write ``data`` to a new, uniquely named temporary file in ``path``'s folder (created if
    needed); return its path. Nothing is left behind if this fails or is interrupted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def _place(tmp: Path, path: Path, overwrite: bool) -> None:
    """Move the finished temporary file to ``path``: ``os.replace`` when overwriting; otherwise a
    hard link, which fails if ``path`` appeared meanwhile (then the temporary file is removed).
    Filesystems without hard links fall back to a check and ``os.replace``."""
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        os.unlink(tmp)
        raise OutputPathError(f"{path} exists; pass overwrite=True to replace it") from None
    except OSError:  # no hard links here (some network and FAT filesystems)
        if os.path.lexists(path):
            os.unlink(tmp)
            raise OutputPathError(f"{path} exists; pass overwrite=True to replace it") from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    """``str`` as UTF-8, bytes-like as ``bytes``."""
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def refuse_existing(path: PathLike, overwrite: bool = False) -> Path:
    """``path`` as a Path, or :class:`OutputPathError` when it is a folder, or an existing file and
    not ``overwrite`` (what :func:`write_file` refuses, for a caller to ask before any work)."""
    path = Path(os.fspath(path))
    if path.is_dir():
        raise OutputPathError(f"{path} is a folder; give a file name")
    if os.path.lexists(path) and not overwrite:
        raise OutputPathError(f"{path} exists; pass overwrite=True to replace it")
    return path


def write_file(path: PathLike, data: bytes | bytearray | memoryview | str, *, overwrite: bool = False) -> Path:
    """Write ``data`` (``str`` as UTF-8) to ``path`` atomically; return the path.

    An existing file is kept, and :class:`OutputPathError` raised, unless ``overwrite``. A folder
    at ``path`` is refused. See the module docstring for the guarantees.
    """
    path = refuse_existing(path, overwrite)
    data = as_bytes(data)
    with _signals_held():  # from the temporary file's creation to its rename or removal
        tmp = _temp_for(path, data)
        try:
            _place(tmp, path, overwrite)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return path


#: Depth of the sections that must not be cut in half (:func:`_signals_held`), and the interrupts a
#: signal handler deferred while one ran (:func:`defer_interrupt`).
_CRITICAL = [0]
_DEFERRED: list[BaseException] = []


def defer_interrupt(exc: BaseException) -> bool:
    """For a signal handler (the CLI's): inside a section that must not be cut in half, keep ``exc``
    to be raised when the section ends and return True; otherwise return False (raise it now).

    The signal mask of :func:`_signals_held` alone is not enough: the OS may deliver SIGINT to
    another thread (BLAS, numba, torch pools), and Python then runs the handler in the main thread
    at its next bytecode, inside the section (measured: a temporary file left behind by an
    interrupted ``intq run``, fuzz CI sample seed 17 case 274)."""
    if _CRITICAL[0] > 0:
        _DEFERRED.append(exc)
        return True
    return False


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back (delivered when the block ends): creating a temporary file and
    registering it for removal, or a few renames, must not be cut in half. The signal mask holds
    the signal in the main thread; :func:`defer_interrupt` holds what a handler raises from a
    signal another thread received. The deferred interrupt is raised when the outermost section
    ends (after its cleanup)."""
    main = threading.current_thread() is threading.main_thread()
    old = None
    if main and hasattr(signal, "pthread_sigmask"):
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    _CRITICAL[0] += 1
    try:
        yield
    finally:
        _CRITICAL[0] -= 1
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a held signal's handler runs here
        if _CRITICAL[0] == 0 and _DEFERRED:
            exc = _DEFERRED[0]
            _DEFERRED.clear()
            raise exc


class StagedOutputs:
    """A command's output files as one transaction (see the module docstring).

    ``stage(path, data)`` writes a temporary file next to ``path`` at once (so a full disk fails
    early, before anything is replaced); ``commit()`` moves every staged file into place, in
    staging order; ``discard()`` (also what leaving a ``with`` block by an exception does)
    removes the temporary files. Output paths are expected to have passed :func:`check_outputs`.
    """

    def __init__(self, *, overwrite: bool = False):
        self.overwrite = overwrite
        self._staged: dict[Path, Path] = {}  # output -> its temporary file
        self.committed: list[Path] = []  # the outputs already moved into place

    def __enter__(self) -> "StagedOutputs":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()

    def stage(self, path: PathLike, data: bytes | bytearray | memoryview | str) -> Path:
        """Write ``data`` to a temporary file for ``path``; it replaces ``path`` at :meth:`commit`."""
        path = Path(os.fspath(path))
        if any(same_file(path, p) for p in self._staged):
            raise OutputPathError(f"{path} is staged twice; give each output its own path")
        data = as_bytes(data)
        with _signals_held():  # the temporary file exists only once it is registered for discard()
            self._staged[path] = _temp_for(path, data)
        return path

    @property
    def paths(self) -> tuple[Path, ...]:
        """The outputs staged and not yet committed, in staging order."""
        return tuple(self._staged)

    def commit(self) -> tuple[Path, ...]:
        """Move every staged file into place (recorded in :attr:`committed` as each lands); return
        their paths. If one cannot be placed (it appeared meanwhile, a permission changed), the
        ones not yet placed are removed and the error is raised; those already placed stay (each
        is complete)."""
        with _signals_held():
            try:
                for path, tmp in list(self._staged.items()):
                    _place(tmp, path, self.overwrite)
                    del self._staged[path]
                    self.committed.append(path)
            finally:
                self.discard()
        return tuple(self.committed)

    def discard(self) -> None:
        """Remove every staged temporary file; the outputs stay as they were."""
        for tmp in self._staged.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._staged.clear()


def stray_temporaries(folders: Iterable[PathLike]) -> list[Path]:
    """intq temporary files left in ``folders`` (none should ever be: a test helper)."""
    return sorted(p for f in folders for p in Path(f).glob(f".*{TEMP_SUFFIX}"))
