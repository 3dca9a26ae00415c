"""The example apps of ``examples/`` for their tests: each imported from its file, and each with
its marks taken out (the plain LangGraph app it was before marlang), to run side by side."""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _module(name: str, path: Path, code: Any, namespace: dict[str, Any] | None = None) -> ModuleType:
    module = ModuleType(name)
    module.__file__ = str(path)
    module.__dict__.update(namespace or {})
    # registered before it runs: LangGraph reads the state's annotations through the module
    sys.modules[name] = module
    exec(code, module.__dict__)  # noqa: S102 - the example's own source
    return module


def load_example(stem: str) -> ModuleType:
    """``examples/<stem>.py`` imported as the module ``<stem>``."""
    if stem in sys.modules:
        return sys.modules[stem]
    spec = importlib.util.spec_from_file_location(stem, EXAMPLES / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[stem] = module
    spec.loader.exec_module(module)
    return module


def _is_mark(node: ast.AST, kind: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == kind
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "marlang"
    )


class _Unmark(ast.NodeTransformer):
    """``marlang.prompt(name, text)`` -> ``text``; ``marlang.chat_model(role, default=spec)`` ->
    ``init_chat_model(spec)``; ``import marlang`` goes."""

    def __init__(self) -> None:
        self.prompts: dict[str, str] = {}
        self.roles: list[str] = []

    def visit_Import(self, node: ast.Import) -> ast.AST | None:
        return None if [alias.name for alias in node.names] == ["marlang"] else node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _is_mark(node, "prompt"):
            name, default = node.args
            self.prompts[ast.literal_eval(name)] = ast.literal_eval(default)
            return default
        if _is_mark(node, "chat_model"):
            self.roles.append(ast.literal_eval(node.args[0]))
            default = node.args[1] if len(node.args) > 1 else next(k.value for k in node.keywords if k.arg == "default")
            return ast.Call(ast.Name("init_chat_model", ast.Load()), [default], [])
        return node


def load_unmarked(stem: str, init_chat_model: Callable[[Any], Any]) -> tuple[ModuleType, dict[str, str], list[str]]:
    """``examples/<stem>.py`` with its marks replaced by plain code (each prompt by its default
    text, each model mark by ``init_chat_model(default)``), as the module ``<stem>_unmarked``;
    with the prompts' defaults by name and the model marks' roles."""
    path = EXAMPLES / f"{stem}.py"
    unmark = _Unmark()
    tree = ast.fix_missing_locations(unmark.visit(ast.parse(path.read_text())))
    left = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "marlang"]
    assert not left, f"{path.name} uses marlang outside its marks and function-local imports, lines {left}"
    module = _module(f"{stem}_unmarked", path, compile(tree, str(path), "exec"), {"init_chat_model": init_chat_model})
    return module, unmark.prompts, unmark.roles
