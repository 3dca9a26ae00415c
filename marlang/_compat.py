"""Old module paths that still import: ``marlang.envs_text``, ``marlang.envs_marl``,
``marlang.tasks`` (and their modules) and ``marlang.trainers.neural.tasks`` resolve to their
homes under ``marlang.envs`` / ``marlang.trainers``, each with one DeprecationWarning.

A ``sys.meta_path`` finder (installed by ``import marlang``) answers for the old names only:
an old module *is* its new module (``marlang.envs_text.babyai is marlang.envs.babyai.text``),
so patching through either name patches the same object. An old package is a small module
that forwards its attributes to the new package(s) and its submodules to their new homes.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from typing import Any

MOVED_MODULES: dict[str, str] = {
    "marlang.envs_text.babyai": "marlang.envs.babyai.text",
    "marlang.envs_text.babyai_agent": "marlang.envs.babyai.agent",
    "marlang.envs_text.babyai_levels": "marlang.envs.babyai.levels",
    "marlang.envs_text.babyai_narration": "marlang.envs.babyai.narration",
    "marlang.envs_text.babyai_scripted": "marlang.envs.babyai.scripted",
    "marlang.envs_text.babyai_shaping": "marlang.envs.babyai.shaping",
    "marlang.envs_text.babyai_text": "marlang.envs.babyai.view",
    "marlang.envs_text.coding_tasks": "marlang.envs.tasks.coding",
    "marlang.envs_text.cooperative_tasks": "marlang.envs.tasks.cooperative",
    "marlang.envs_text.reasoning_tasks": "marlang.envs.tasks.reasoning",
    "marlang.envs_text.task_envs": "marlang.envs.tasks.factories",
    "marlang.envs_text.task_feedback": "marlang.envs.tasks.feedback",
    "marlang.envs_text.task_narration": "marlang.envs.tasks.narration",
    "marlang.envs_text.narration": "marlang.envs.core.narration",
    "marlang.envs_text.narrator": "marlang.envs.core.narrator",
    "marlang.envs_text.spaces": "marlang.envs.core.spaces",
    "marlang.envs_text.registry": "marlang.envs.registry",
    "marlang.envs_text.overcooked": "marlang.envs.overcooked.text",
    "marlang.envs_text.overcooked_narration": "marlang.envs.overcooked.narration",
    "marlang.envs_text.overcooked_package": "marlang.envs.overcooked.package",
    "marlang.envs_text.overcooked_scripted": "marlang.envs.overcooked.scripted",
    "marlang.envs_text.overcooked_subgoals": "marlang.envs.overcooked.subgoals",
    "marlang.envs_text.overcooked_text": "marlang.envs.overcooked.view",
    "marlang.envs_text.pistonball": "marlang.envs.pistonball.text",
    "marlang.envs_text.pistonball_narration": "marlang.envs.pistonball.narration",
    "marlang.envs_marl.base": "marlang.envs.core.numeric",
    "marlang.envs_marl.registration": "marlang.envs.registry",
    "marlang.envs_marl.babyai": "marlang.envs.babyai.numeric",
    "marlang.envs_marl.pistonball": "marlang.envs.pistonball.numeric",
    "marlang.envs_marl.climbing": "marlang.envs.credit.climbing",
    "marlang.envs_marl.gridworld": "marlang.envs.credit.gridworld",
    "marlang.envs_marl.lbf": "marlang.envs.credit.lbf",
    "marlang.envs_marl.rware": "marlang.envs.credit.rware",
    "marlang.envs_marl.spaceworld": "marlang.envs.credit.spaceworld",
    "marlang.envs_marl.two_switch": "marlang.envs.credit.two_switch",
    "marlang.envs_marl.victim_rubble": "marlang.envs.credit.victim_rubble",
    "marlang.tasks.check_splitting": "marlang.envs.tasks.data.check_splitting",
    "marlang.tasks.coophumaneval": "marlang.envs.tasks.data.coophumaneval",
    "marlang.tasks.hotpotqa": "marlang.envs.tasks.data.hotpotqa",
    "marlang.tasks.humaneval": "marlang.envs.tasks.data.humaneval",
    "marlang.tasks.loading": "marlang.envs.tasks.data.loading",
    "marlang.tasks.math_answers": "marlang.envs.tasks.data.math_answers",
    "marlang.tasks.mbpp": "marlang.envs.tasks.data.mbpp",
    "marlang.tasks.problems": "marlang.envs.tasks.data.problems",
    "marlang.trainers.neural.tasks": "marlang.trainers.neural.benchmarl_task",
}
"""Old module -> the module that now holds its code."""

MOVED_PACKAGES: dict[str, str] = {
    "marlang.envs_text": "marlang.envs",
    "marlang.envs_marl": "marlang.envs",
    "marlang.tasks": "marlang.envs.tasks.data",
}
"""Old package -> the package its public names now come from."""

_PACKAGE_EXPORTS: dict[str, tuple[str, ...]] = {
    "marlang.envs_marl": ("LazyEnvFactory", "NumericTextEnv", "StepOutcome", "register_marl_envs"),
}
"""``__all__`` of an old package that exported fewer names than its new one."""


def _warn(old: str, new: str) -> None:
    # stacklevel 3 is the importing code: warnings skips the import machinery's own frames
    # between it and exec_module (level 2).
    warnings.warn(f"{old} is deprecated; import {new}", DeprecationWarning, stacklevel=3)


class _OldPackage(types.ModuleType):
    """An old package: its names come from the new modules, its submodules are aliases."""

    def __getattr__(self, name: str) -> Any:
        submodule = f"{self.__name__}.{name}"
        if submodule in MOVED_MODULES:
            return importlib.import_module(submodule)
        if name == "__all__" and self.__name__ in _PACKAGE_EXPORTS:
            return list(_PACKAGE_EXPORTS[self.__name__])
        return getattr(importlib.import_module(MOVED_PACKAGES[self.__name__]), name)


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads the old names; every other name is left to the normal finders."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname in MOVED_PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        if fullname in MOVED_MODULES:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name in MOVED_PACKAGES:
            return _OldPackage(spec.name)
        return types.ModuleType(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        if name in MOVED_PACKAGES:
            module.__path__ = []  # a package, so its old submodules come back to this finder
            _warn(name, MOVED_PACKAGES[name])
            return
        new = MOVED_MODULES[name]
        _warn(name, new)
        # The import system hands back whatever sys.modules holds after exec_module: the new
        # module itself, so the old name is an alias and nothing is loaded twice.
        sys.modules[name] = importlib.import_module(new)


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
