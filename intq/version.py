"""intq's version, the one copy (``intq.__version__``, ``intq --version``, ``--json``'s ``intq_version``,
the HTML report's header, pyproject.toml's dynamic version). Imports nothing."""

__version__ = "0.1.0"
