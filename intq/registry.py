"""One table shape for every "name -> implementation" table in intq (ops, rules, observers...).

A table is one :class:`Registry` instance; an entry joins it by decorator, under its own
``__name__`` or under the keys given::

    RULES = Registry("conversion rule", ConversionError)

    @RULES.register()                 # key "Conv"
    def Conv(cx, node): ...

    @RULES.register("Max", "Min")     # one entry, two keys
    def Max(cx, node): ...

    RULES.lookup("Conv")              # missing key: RULES' error, listing every available key

Keys are any hashable value: a string, or a tuple such as ``("CONV_2D", "int8")`` (shown in
listings as ``CONV_2D/int8``). A registry is a read-only :class:`~collections.abc.Mapping`
(``in``, ``[]``, iteration in registration order, ``len``, ``items()``). Registering a key twice
is a programming error (``AssertionError``): one key, one implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Generic, TypeVar

from intq.errors import IntqError, UnsupportedOperatorError

V = TypeVar("V")


def _show(key: Hashable) -> str:
    """A key as listed in errors: tuples joined by ``/``, everything else by ``str``."""
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)


class Registry(Mapping[Hashable, V], Generic[V]):
    """A named table of implementations, filled by :meth:`register` (see the module docstring).

    ``what`` names one entry in error messages ("float operator", "conversion rule"); ``error``
    is the :class:`~intq.errors.IntqError` subclass :meth:`lookup` raises for a missing key.
    """

    def __init__(self, what: str, error: type[IntqError] = UnsupportedOperatorError):
        self.what = what
        self.error = error
        self._entries: dict[Hashable, V] = {}

    def register(self, *keys: Hashable) -> Callable[[V], V]:
        """Decorator: add the decorated object under ``keys`` (default: its ``__name__``)."""

        def add(entry: V) -> V:
            for key in keys or (entry.__name__,):
                assert key not in self._entries, f"{self.what} {_show(key)!r} registered twice"
                self._entries[key] = entry
            return entry

        return add

    def lookup(self, key: Hashable) -> V:
        """The entry for ``key``; a missing key raises ``self.error`` listing every available one."""
        try:
            return self._entries[key]
        except KeyError:
            raise self.error(f"no {self.what} for {_show(key)!r}; available: {self.available()}") from None

    def available(self) -> str:
        """Every key, sorted, as one comma-separated string (for error messages)."""
        return ", ".join(sorted(map(_show, self._entries)))

    def __getitem__(self, key: Hashable) -> V:
        return self._entries[key]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {len(self)} entries)"
