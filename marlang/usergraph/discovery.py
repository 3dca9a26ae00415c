"""The marks a user's app writes, found by reading its source before anything runs: each marked
prompt with its default text and each marked chat-model role (`app_marks`), so that a run knows
the policies it trains before the first episode, without running the user's code or a model.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from marlang.usergraph.marks import _shown

logger = logging.getLogger(__name__)

_MARK_HOMES = ("marlang", "marlang.usergraph", "marlang.usergraph.marks")
"""The modules a mark is imported from or called through (``marlang.prompt``, ...)."""

_Kind = Literal["prompt", "chat_model"]
_KINDS: tuple[_Kind, ...] = ("prompt", "chat_model")
_MARKS: dict[str, _Kind] = {f"{home}.{kind}": kind for home in _MARK_HOMES for kind in _KINDS}
"""Each mark by its full dotted name, as ``marlang.usergraph.prompt``."""

_PARAMETERS = {"prompt": ("name", "default"), "chat_model": ("role", "default")}


@dataclass(frozen=True)
class DeclaredMark:
    """One mark read from the source: a prompt's name and its default text, or a chat model's
    role and its default spec (None when the default is not a string literal, such as a model
    built in the code); where it is written (``file:line``, as a running mark reports it)."""

    kind: Literal["prompt", "chat_model"]
    name: str
    default: str | None
    place: str


@dataclass(frozen=True)
class AppMarks:
    """The marks of an app, by prompt name and by model role, each at the first place found;
    the files read; and the places of marks whose name (or a prompt's default) is computed,
    which only running the app can tell."""

    prompts: dict[str, DeclaredMark]
    models: dict[str, DeclaredMark]
    files: tuple[str, ...]
    dynamic: tuple[str, ...] = field(default=())

    def prompt_defaults(self) -> dict[str, str]:
        """Each marked prompt's default text, by name: the policies' first versions."""
        return {name: mark.default for name, mark in self.prompts.items() if mark.default is not None}


def app_marks(entry_point: str) -> AppMarks:
    """The marks of the app whose builder ``entry_point`` names (``"package.module:function"``,
    a config's ``graph.build``), read from source: nothing is imported or run.

    The files read are the builder's module and, transitively, each module of the app that it
    imports (function-local and relative imports included) with the ``__init__.py`` of each
    package on the way: the app is the module's top-level package, or for a module outside a
    package, the modules beside its file. So the marks of the graph's own code are found, and
    not those of other code in a large package. A module reached only through ``importlib``
    is not read; a file that does not parse is skipped.

    A mark is a call of ``prompt`` or ``chat_model`` through ``marlang``, ``marlang.usergraph``
    or ``marlang.usergraph.marks`` as the file imports them (aliases included), its arguments
    positional or by keyword. Names and defaults are read when they are string literals
    (adjacent literals are one string to Python, so they count; ``"a" + "b"`` does not); a mark
    whose name or prompt default is computed is listed in `AppMarks.dynamic`: it is found only
    when it runs. One prompt name at two places with different defaults raises a ValueError
    naming both, as the marks do at run time.
    """
    module, colon, function = entry_point.partition(":")
    if not colon or not module or not function:
        raise ValueError(f"graph.build {entry_point!r} must look like 'package.module:function'")
    trees = _app_sources(module)
    prompts: dict[str, DeclaredMark] = {}
    models: dict[str, DeclaredMark] = {}
    dynamic: list[str] = []
    for path in sorted(trees):
        for mark in _file_marks(path, trees[path], dynamic):
            if mark.kind == "chat_model":
                models.setdefault(mark.name, mark)
                continue
            seen = prompts.setdefault(mark.name, mark)
            if seen.default != mark.default:  # both str: a prompt with a computed default is dynamic
                raise ValueError(
                    f"prompt {mark.name!r} is marked twice with different defaults: {_shown(seen.default or '')} "
                    f"at {seen.place} and {_shown(mark.default or '')} at {mark.place}; give both the same "
                    "default or give one of them another name"
                )
    return AppMarks(prompts=prompts, models=models, files=tuple(str(path) for path in sorted(trees)),
                    dynamic=tuple(dynamic))


@dataclass(frozen=True)
class _Source:
    """A module of the app: its file, its dotted name, and whether it is a package (the base
    of its relative imports)."""

    path: Path
    module: str
    package: bool


@dataclass(frozen=True)
class _App:
    """Where an app's modules live: ``dirs`` hold its top-level names; ``only`` is the one
    top-level name of a packaged app (None: any module found in ``dirs``)."""

    dirs: tuple[Path, ...]
    only: str | None

    def sources(self, module: str) -> list[_Source]:
        """The files of the app that importing ``module`` runs, as far down its dotted name as
        the app has them: each package's ``__init__.py``, then the module's own file."""
        parts = module.split(".")
        if parts[0] == "marlang" or (self.only is not None and parts[0] != self.only):
            return []  # outside the app; marlang's own code never is a user's app
        found: list[_Source] = []
        dirs = list(self.dirs)
        for depth, part in enumerate(parts, start=1):
            name = ".".join(parts[:depth])
            inits = [folder / part / "__init__.py" for folder in dirs if (folder / part / "__init__.py").is_file()]
            files = [folder / f"{part}.py" for folder in dirs if (folder / f"{part}.py").is_file()]
            namespaces = [folder / part for folder in dirs if (folder / part).is_dir()]
            if inits:  # a package, as Python finds it first
                found.append(_Source(inits[0], name, package=True))
                dirs = [inits[0].parent]
            elif files:
                found.append(_Source(files[0], name, package=False))
                break
            elif namespaces:  # a namespace package: no file of its own
                dirs = namespaces
            else:
                break
        return found


def _app_of(module: str) -> _App:
    """The app of the builder's module, from its top-level module's spec (found, never imported)."""
    top = module.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):  # ValueError: a module imported without a spec
        spec = None
    if spec is not None and spec.submodule_search_locations is not None:
        return _App(dirs=tuple(Path(location).parent for location in spec.submodule_search_locations), only=top)
    if spec is not None and spec.origin is not None and spec.origin.endswith(".py") and top == module:
        return _App(dirs=(Path(spec.origin).parent,), only=None)
    raise ValueError(f"graph.build module {module!r} has no Python source to read its marks from; "
                     "name a module of a .py file or a package")


def _app_sources(module: str) -> dict[Path, ast.Module]:
    """The parsed files of the builder's module and of the app's modules it reaches by imports."""
    app = _app_of(module)
    queue = app.sources(module)
    if not queue or queue[-1].module != module:
        raise ValueError(f"graph.build module {module!r} has no Python source to read its marks from; "
                         "name a module of a .py file or a package")
    trees: dict[Path, ast.Module] = {}
    seen = {source.path for source in queue}
    while queue:
        source = queue.pop(0)
        try:
            tree = ast.parse(source.path.read_bytes(), filename=str(source.path))
        except (OSError, SyntaxError, ValueError) as err:  # ValueError: null bytes in the source
            logger.debug("marks: skipping %s, which does not parse: %s", source.path, err)
            continue
        trees[source.path] = tree
        for imported in _imported_modules(tree, source):
            for found in app.sources(imported):
                if found.path not in seen:
                    seen.add(found.path)
                    queue.append(found)
    return trees


def _imported_modules(tree: ast.Module, source: _Source) -> Iterator[str]:
    """The absolute names of the modules a file may import, anywhere in its code (for ``from a
    import b``, ``a.b`` as b may be a module: the app's sources stop at what exists)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = source.module if source.package else source.module.rpartition(".")[0]
                parts = package.split(".") if package else []
                if node.level - 1 >= len(parts):
                    continue  # past the top of the app: Python refuses it too
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            yield from (base if alias.name == "*" else f"{base}.{alias.name}" for alias in node.names)


def _file_marks(path: Path, tree: ast.Module, dynamic: list[str]) -> Iterator[DeclaredMark]:
    """The marks a file writes, in source order; the places of computed ones go to ``dynamic``."""
    modules, functions = _mark_names(tree)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    for call in sorted(calls, key=lambda node: (node.lineno, node.col_offset)):
        kind = functions.get(call.func.id) if isinstance(call.func, ast.Name) else None
        if kind is None:
            dotted = _dotted(call.func)
            if dotted is not None:
                head, _, rest = dotted.partition(".")
                kind = _MARKS.get(f"{modules[head]}.{rest}") if head in modules and rest else None
        if kind is None:
            continue
        place = f"{path}:{call.lineno}"
        name, default = _arguments(call, _PARAMETERS[kind])
        if not isinstance(name, str) or (kind == "prompt" and not isinstance(default, str)):
            dynamic.append(place)
            continue
        yield DeclaredMark(kind, name, default if isinstance(default, str) else None, place)


def _mark_names(tree: ast.Module) -> tuple[dict[str, str], dict[str, _Kind]]:
    """The names a file binds to the modules marks live in (``ml`` for ``import marlang as ml``)
    and to the marks themselves (``P`` for ``from marlang import prompt as P``)."""
    modules: dict[str, str] = {}
    functions: dict[str, _Kind] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is None and alias.name.partition(".")[0] == "marlang":
                    modules["marlang"] = "marlang"  # `import marlang.usergraph` binds marlang
                elif alias.asname is not None and alias.name in _MARK_HOMES:
                    modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in _MARK_HOMES:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in _MARKS:
                    functions[alias.asname or alias.name] = _MARKS[full]
                elif full in _MARK_HOMES:
                    modules[alias.asname or alias.name] = full
    return modules, functions


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for an attribute chain on a name, None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _arguments(call: ast.Call, parameters: tuple[str, str]) -> tuple[object, object]:
    """The literal values of a mark's two arguments, positional or by keyword; None where an
    argument is missing or not a literal (``*args`` and ``**kwargs`` make both unknown)."""
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(kw.arg is None for kw in call.keywords):
        return None, None
    given: dict[str, ast.expr] = dict(zip(parameters, call.args))
    for keyword in call.keywords:
        if keyword.arg is not None:
            given[keyword.arg] = keyword.value
    values = [given.get(parameter) for parameter in parameters]
    first, second = (value.value if isinstance(value, ast.Constant) else None for value in values)
    return first, second
