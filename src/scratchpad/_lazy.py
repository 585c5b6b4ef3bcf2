"""Lazy package exports, named once. A public package lists its exports in one place: the
imports of an ``if TYPE_CHECKING:`` block in its ``__init__.py`` (``from module import Name
as Name``), where type checkers and editors read them. :func:`lazy_exports` derives the rest
from that block: ``__all__`` (its public names, sorted), and ``__getattr__`` / ``__dir__``
that import a name from its module on first access. Importing a package stays cheap (the CLI
and the kernel's host imports must not pay for everything), and the block is read only when
a name is first asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from importlib.util import resolve_name
from typing import Any


def exports_of(init_file: str, package: str) -> dict[str, tuple[str, str]]:
    """The names the ``if TYPE_CHECKING:`` block of ``init_file`` imports: name → (module,
    name there)."""
    import ast

    with open(init_file, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), init_file)
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom):
                module = resolve_name("." * statement.level + (statement.module or ""), package)
                for alias in statement.names:
                    found[alias.asname or alias.name] = (module, alias.name)
    if not found:
        raise ImportError(f"{init_file} names no exports in an `if TYPE_CHECKING:` block")
    return found


def lazy_exports(
    package: str, init_file: str, namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` (its ``__init__.py`` is
    ``init_file``), exporting what its ``TYPE_CHECKING`` block imports; ``__all__`` and each
    resolved name are cached in ``namespace``."""
    table: dict[str, tuple[str, str]] = {}

    def exports() -> dict[str, tuple[str, str]]:
        if not table:
            table.update(exports_of(init_file, package))
        return table

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = sorted(n for n in exports() if not n.startswith("_"))
        else:
            found = exports().get(name)
            if found is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            module, original = found
            value = getattr(import_module(module), original)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports(), "__all__"})

    return __getattr__, __dir__
