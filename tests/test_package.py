"""``import marlang``: the public names come from their one home, and each module has one name
(marlang 0.1.0 was never released, so no old import path is kept)."""

import importlib
import importlib.util
from pathlib import Path

import pytest

import marlang
from marlang.lazy import home_of_each


@pytest.mark.parametrize("name", marlang.__all__)
def test_every_public_name_is_its_home_modules_object(name):
    target = home_of_each(marlang._EXPORTS)[name]
    module, _, attr = target.partition(":")
    assert getattr(marlang, name) is getattr(importlib.import_module(module), attr or name)


@pytest.mark.parametrize("old", [
    "marlang.experiment", "marlang.runtime", "marlang._compat", "marlang.trainers.adapter_learner",
    "marlang.envs_text", "marlang.envs_text.babyai", "marlang.envs_marl.lbf", "marlang.tasks.humaneval",
    "marlang.trainers.neural.tasks",
    # methods moved to one folder each (marlang.methods), the LoRA core to marlang.methods.lora
    "marlang.trainers", "marlang.trainers.ppo", "marlang.trainers.magrpo", "marlang.trainers.template",
    "marlang.trainers.adapters", "marlang.trainers.neural", "marlang.credit", "marlang.credit.lca",
    "marlang.learners.langmarl", "marlang.learners.reflexion", "marlang.learners.langmarl_parsing",
    "marlang.lora", "marlang.lora.team",
    # loose top-level modules moved into the packages of their layer
    "marlang.cli_parser", "marlang.review", "marlang.compare", "marlang.crossplay", "marlang.creditcheck",
    "marlang.report", "marlang.cost", "marlang.plots", "marlang.intervals", "marlang.scalars",
])
def test_a_module_has_one_name(old):
    try:
        spec = importlib.util.find_spec(old)
    except ModuleNotFoundError:  # its parent package is gone too
        spec = None
    # only this marlang counts: an editable install of another checkout may resolve the name
    assert spec is None or not Path(spec.origin).is_relative_to(Path(marlang.__file__).parent)


def test_each_method_has_one_folder_beside_the_lora_core_and_the_seam():
    root = Path(marlang.__file__).parent
    methods = sorted(p.name for p in (root / "methods").iterdir() if (p / "__init__.py").exists())
    assert methods == ["langmarl", "lora", "magrpo", "neural", "ppo", "reflexion"]
    assert (root / "methods" / "neural" / "critics" / "__init__.py").exists()
    assert sorted(p.stem for p in (root / "learners").glob("*.py")) == ["__init__", "base", "context"]
    assert {"team", "files", "options", "trainer", "distributed", "playback"} <= {
        p.stem for p in (root / "methods" / "lora").glob("*.py")}
    # (a checkout may keep an old folder's __pycache__; no module is left there)
    assert not list((root / "trainers").glob("**/*.py")) and not list((root / "credit").glob("**/*.py"))
    assert not list((root / "lora").glob("**/*.py"))


def test_neural_ppo_options_have_one_name():
    from marlang.methods import neural

    assert neural.NeuralPPOOptions.__name__ == "NeuralPPOOptions"
    with pytest.raises(AttributeError):
        neural.PPOOptions  # noqa: B018 - LoRA PPO's options are marlang.methods.ppo.learner.PPOOptions
