"""Static data flow in a team's Python answers, read from the syntax tree and never run: whether
a function's returned value is computed from a given source (a helper's result, a parameter),
and whether the team's code rebinds a name or reaches into namespaces at run time.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Iterable

Source = Callable[[ast.expr], bool]
"""Whether an expression, by itself, is a source of the value followed (a helper call)."""

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)

NAMESPACE_REACHERS = frozenset({"globals", "vars", "locals", "exec", "eval", "compile", "setattr",
                                "delattr", "__import__", "__builtins__", "__loader__", "__spec__"})
"""Names that read or rebind names at run time, out of the syntax tree's sight."""
FRAME_ATTRIBUTES = frozenset({"_getframe", "_current_frames", "f_globals", "f_locals", "f_back",
                              "f_builtins", "f_code", "f_lasti", "f_trace", "tb_frame", "gi_frame",
                              "cr_frame", "ag_frame", "settrace", "setprofile", "monitoring",
                              "get_objects", "get_referrers", "get_referents", "modules"})
"""Attributes that reach running frames (directly or through a trace function), the
interpreter's objects or its loaded modules."""
ATTRIBUTE_READERS = frozenset({"getattr", "hasattr", "attrgetter", "methodcaller"})
"""Functions that read an attribute named by a value rather than by the code."""
INTROSPECTING_MODULES = frozenset({"builtins", "inspect", "gc", "ctypes", "importlib",
                                   "traceback"})
"""Modules whose import gives code the frames, the builtins or every live object."""


def carries(node: ast.AST, tainted: set[str], source: Source) -> bool:
    """Whether the value of ``node`` is computed from a source or a name in ``tainted``.

    Only values count, never decisions: a comparison, a ``not``, the test of a conditional
    expression and a comprehension's filters carry nothing into the value they decide about,
    and neither does a lambda (a function, not a value computed here)."""
    if isinstance(node, ast.expr) and source(node):
        return True
    if isinstance(node, ast.Name):
        return node.id in tainted
    if isinstance(node, (ast.Compare, ast.Lambda)):
        return False
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return False
    if isinstance(node, ast.IfExp):
        return carries(node.body, tainted, source) or carries(node.orelse, tainted, source)
    if isinstance(node, _COMPREHENSIONS):
        inner = set(tainted)
        iterated = False
        for generator in node.generators:
            if carries(generator.iter, inner, source):
                iterated = True
                inner |= _target_names(generator.target)
        elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return iterated or any(carries(e, inner, source) for e in elements)
    return any(carries(child, tainted, source) for child in ast.iter_child_nodes(node))


def _target_names(target: ast.AST) -> set[str]:
    """The names an assignment target stores into: ``x``, ``a, *b``, and the container ``d``
    of ``d[k] = ...`` or ``d.k = ...`` (its contents change)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        return _target_names(target.value)
    return set()


def _flows(node: ast.AST, tainted: set[str], source: Source) -> set[str]:
    """Names one statement or expression node makes carry the value."""
    if isinstance(node, ast.Assign) and carries(node.value, tainted, source):
        return set().union(*(_target_names(t) for t in node.targets))
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
        return _target_names(node.target) if carries(node.value, tainted, source) else set()
    if isinstance(node, (ast.For, ast.AsyncFor)) and carries(node.iter, tainted, source):
        return _target_names(node.target)
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return _target_names(node.optional_vars) if carries(node.context_expr, tainted, source) else set()
    if isinstance(node, ast.NamedExpr) and carries(node.value, tainted, source):
        return {node.target.id}
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and any(carries(a, tainted, source) for a in [*node.args, *(k.value for k in node.keywords)])):
        return _target_names(node.func.value)  # out.append(aux(x)) puts the value into out
    return set()


def tainted_names(function: ast.FunctionDef | ast.AsyncFunctionDef, source: Source,
                  start: Iterable[str] = ()) -> set[str]:
    """The local names of ``function`` whose value is computed from a source (or from a name
    in ``start``), followed through assignments, loops and in-place updates until nothing new
    is found (functions nested in it are not followed). A branch is a decision, not a value:
    an ``if`` whose test reads a source makes nothing inside it carry the value."""
    tainted = set(start)
    nodes = _own_nodes(function)
    while True:
        found = set().union(*(_flows(n, tainted, source) for n in nodes)) - tainted
        if not found:
            return tainted
        tainted |= found


def returns_from(function: ast.FunctionDef | ast.AsyncFunctionDef, source: Source,
                 start: Iterable[str] = ()) -> bool:
    """Whether a value ``function`` returns (or yields) is computed from a source."""
    tainted = tainted_names(function, source, start)
    own = _own_nodes(function)
    return any(
        isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) and n.value is not None
        and carries(n.value, tainted, source)
        for n in own
    )


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of ``function``'s body, without those of functions and classes nested in it."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def bindings(tree: ast.AST) -> Counter[str]:
    """How many times each name is bound anywhere in ``tree``: definitions, assignment and
    deletion targets, parameters, imports, ``except ... as``, patterns, ``global``/``nonlocal``."""
    counts: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] += 1
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] += 1
        elif isinstance(node, ast.arg):
            counts[node.arg] += 1
        elif isinstance(node, ast.alias):
            counts[node.asname or node.name.split(".")[0]] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            counts.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            counts[node.name] += 1
        elif isinstance(node, ast.MatchMapping) and node.rest:
            counts[node.rest] += 1
    return counts


def reaches_namespaces(tree: ast.AST) -> bool:
    """Whether code could rebind a function behind the syntax tree's back, or read the
    sandbox's own frames: it names one of ``NAMESPACE_REACHERS`` (``__builtins__`` among
    them), touches a dunder attribute (``f.__code__``, ``__globals__``,
    ``__dict__``) or one of ``FRAME_ATTRIBUTES`` (``sys._getframe().f_globals``,
    ``sys.modules``), imports one of ``INTROSPECTING_MODULES`` (or such an attribute by name),
    names one of ``ATTRIBUTE_READERS`` (``operator.attrgetter``; ``getattr``/``hasattr``
    other than called with a plain string), or spells a dunder or frame attribute in a
    string (``"{0.__closure__}".format(f)`` reads it)."""
    # getattr(x, "name") and hasattr(x, "name") read one attribute the code names.
    plain_reads = {id(node.func) for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id in ("getattr", "hasattr") and len(node.args) > 1
                   and isinstance(node.args[1], ast.Constant)
                   and isinstance(node.args[1].value, str)
                   and not node.args[1].value.startswith("_")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in NAMESPACE_REACHERS:
            return True
        if isinstance(node, ast.Attribute) and (node.attr in FRAME_ATTRIBUTES
                                                or _dunder(node.attr)):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                       else [alias.name for alias in node.names])
            if any(m.split(".")[0] in INTROSPECTING_MODULES for m in modules) or any(
                    alias.name in FRAME_ATTRIBUTES | ATTRIBUTE_READERS or _dunder(alias.name)
                    for alias in node.names):
                return True
        if (isinstance(node, ast.Name) and node.id in ATTRIBUTE_READERS
                and id(node) not in plain_reads) or (
                isinstance(node, ast.Attribute) and node.attr in ATTRIBUTE_READERS):
            return True
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and node.value != "__main__" and _NAMES_AN_ATTRIBUTE.search(node.value)):
            return True  # for a reader to use: getattr, or str.format's "{0.__closure__}"
    return False


# A dunder anywhere; a frame attribute alone or after a dot (a docstring may say "modules").
_NAMES_AN_ATTRIBUTE = re.compile(
    r"__\w+__|(?:^|\.)(?:" + "|".join(sorted(FRAME_ATTRIBUTES)) + r")(?:$|\W)")


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4
