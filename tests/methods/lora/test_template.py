"""The weight-space trainer template: PPO and MAGRPO bring options, samples and loss."""

from __future__ import annotations

from marlang.methods.lora import template
from marlang.methods.magrpo.learner import MAGRPOLearner, MAGRPOOptions
from marlang.methods.ppo.learner import PPOLearner, PPOOptions


def test_learners_bring_only_their_options_samples_and_loss():
    for learner, options in ((PPOLearner, PPOOptions), (MAGRPOLearner, MAGRPOOptions)):
        assert issubclass(learner, template.AdapterLearner) and learner.options_model is options
        own = {name for name in vars(learner) if callable(getattr(learner, name))}
        # the update's loop and guarded step are the template's, not copied into the learner
        assert {"fit", "loss"} <= own and own & {"update", "update_from_plan"}
        assert not own & {"epochs", "_step", "_finish_step", "_save"}
