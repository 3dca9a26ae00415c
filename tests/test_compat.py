"""The old module paths (``marlang.envs_text``, ``marlang.envs_marl``, ``marlang.tasks`` and
``marlang.trainers.neural.tasks``) import as their new modules, each with one
DeprecationWarning naming the new path."""

import importlib
import importlib.util
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from marlang._compat import MOVED_MODULES, MOVED_PACKAGES

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_every_old_module_names_an_existing_new_one(old):
    assert importlib.util.find_spec(MOVED_MODULES[old]) is not None


def test_an_old_module_is_its_new_module():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("marlang.envs_text.babyai")
        from marlang.envs_marl.lbf import LevelBasedForagingEnv
        from marlang.tasks.humaneval import HELPER_FUNCTION_NAME
    from marlang.envs.babyai import text
    from marlang.envs.credit.lbf import LevelBasedForagingEnv as new_lbf
    from marlang.envs.tasks.data import HELPER_FUNCTION_NAME as new_name

    assert old is text and old.BabyAITextEnv is text.BabyAITextEnv
    assert LevelBasedForagingEnv is new_lbf
    assert HELPER_FUNCTION_NAME == new_name
    # the module keeps its own name, so pickles and reprs name the new path
    assert old.__name__ == "marlang.envs.babyai.text"


def test_old_packages_forward_their_names():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import marlang.envs_marl
        import marlang.envs_text
        import marlang.tasks
        from marlang.envs_text import babyai_levels  # a module, not the new babyai package
    import marlang.envs
    from marlang.envs.babyai import levels
    from marlang.envs.tasks.data import load_task

    assert marlang.envs_text.make is marlang.envs.make
    assert marlang.envs_text.registry.DEFAULT_REGISTRY is marlang.envs.registry.DEFAULT_REGISTRY
    assert marlang.envs_text.babyai.BabyAITextEnv is marlang.envs.BabyAITextEnv
    assert babyai_levels is levels
    assert marlang.envs_marl.NumericTextEnv is marlang.envs.NumericTextEnv
    assert set(marlang.envs_marl.__all__) >= {"LazyEnvFactory", "register_marl_envs"}
    assert marlang.tasks.load_task is load_task
    with pytest.raises(AttributeError):
        marlang.envs_text.no_such_name  # noqa: B018
    assert set(MOVED_PACKAGES) == {"marlang.envs_text", "marlang.envs_marl", "marlang.tasks"}


def test_one_deprecation_warning_per_old_module_naming_the_new_path():
    script = textwrap.dedent("""
        import warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            import marlang.envs_text.babyai_shaping
            import marlang.envs_text.babyai_shaping
            from marlang.envs_text.babyai_shaping import goal_progress
            import marlang.envs_text
        for w in caught:
            if issubclass(w.category, DeprecationWarning) and "deprecated" in str(w.message):
                print(w.message, "@", w.filename)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.splitlines()
    assert [line.split(" @ ")[0] for line in out] == [
        "marlang.envs_text is deprecated; import marlang.envs",
        "marlang.envs_text.babyai_shaping is deprecated; import marlang.envs.babyai.shaping",
    ]
    # the warning points at the importing code, not at the import machinery
    assert all(line.endswith("@ <string>") for line in out)


def test_an_entry_point_string_with_an_old_path_still_loads():
    from marlang.registry import Registry

    registry = Registry("hook")
    registry.register("old", "marlang.envs_text.babyai_shaping:goal_progress", "old path")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        hook = registry.entry("old").load()
    from marlang.envs.babyai.shaping import goal_progress

    assert hook is goal_progress
