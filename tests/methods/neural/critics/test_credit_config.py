"""learning.critic and the LCA keys in configs: valid choices listed, bad input refused in
one line, and no critic with QMIX/VDN (their loss sees only the team mean)."""

from __future__ import annotations

import pytest

from marlang.config import ConfigError, build_config


def _config(method="ippo", env="gridworld/two-switch", **learning):
    return build_config({"env": {"id": env}, "agents": {"kind": "neural"},
                         "learning": {"method": method, **learning}})


def _error(**kwargs) -> str:
    with pytest.raises((ConfigError, ValueError)) as err:
        _config(**kwargs)
    message = str(err.value)
    assert "\n" not in message.strip()
    return message


@pytest.mark.parametrize("method", ["qmix", "vdn"])
@pytest.mark.parametrize("critic", ["llm_mca", "llm_taca", "lca", "difference"])
def test_a_critic_with_qmix_or_vdn_is_refused(method, critic):
    message = _error(method=method, critic=critic)
    assert "team reward" in message and "mappo or ippo" in message
    _config(method=method)  # without a critic they run as before


@pytest.mark.parametrize("method", ["mappo", "ippo"])
def test_critics_reach_mappo_and_ippo(method):
    for critic in ("llm_mca", "llm_taca", "lca", "difference"):
        assert _config(method=method, critic=critic).learning.options.critic == critic


def test_an_unknown_critic_lists_the_valid_choices():
    message = _error(critic="llm_critic")
    assert all(f"'{c}'" in message for c in ("none", "llm_mca", "llm_taca", "lca", "difference"))


def test_llm_mca_keys_are_checked():
    assert "critic_normalize" in _error(critic="llm_mca", critic_normalize="mean")
    assert "critic_context" in _error(critic="llm_mca", critic_context=100)
    assert "critic_steps" in _error(critic="llm_mca", critic_steps=0)
    assert "task_size" in _error(critic="llm_taca", task_size=0)


@pytest.mark.parametrize("value", [0.5, 0.3, 1.01])
def test_ranker_accuracy_must_lie_above_chance(value):
    assert "ranker_accuracy" in _error(critic="lca", ranker="synthetic", ranker_accuracy=value)


def test_ranker_accuracy_of_one_is_valid():
    assert _config(critic="lca", ranker="synthetic", ranker_accuracy=1.0).learning.options.ranker_accuracy == 1.0


def test_queries_must_be_positive():
    assert "queries" in _error(critic="lca", queries=0)


def test_critic_and_reward_hook_do_not_mix():
    assert "reward_hook" in _error(critic="difference", reward_hook="tests.methods.neural.climbing_credit:zero_rewards")


def test_ranker_groups_must_partition_the_agents():
    assert "agent_7" in _error(critic="lca", ranker_groups=[["agent_0", "agent_7"]])
    assert "exactly once" in _error(critic="lca", ranker_groups=[["agent_0"]])
    _config(critic="lca", ranker_groups=[["agent_0"], ["agent_1"]])


def test_a_bad_critic_model_spec_is_refused():
    assert "critic_model" in _error(critic="lca", ranker="llm", critic_model="gpt-4o")


def test_learner_labels_name_the_critic_so_grids_over_critics_have_distinct_rows():
    assert _config().learning.label == "ippo"
    assert _config(method="mappo", critic="difference").learning.label == "mappo+difference"
    assert _config(critic="llm_taca").learning.label == "ippo+llm_taca"
    assert _config(critic="lca", ranker="heuristic").learning.label == "ippo+lca-heuristic"
    assert _config(critic="lca", ranker="synthetic", ranker_accuracy=0.7,
                   queries=4).learning.label == "ippo+lca-synthetic-70-q4"


@pytest.mark.parametrize("name", ["credit_climbing.yaml", "credit_lbf.yaml", "lca_two_switch.yaml",
                                  "lca_victim_rubble.yaml", "lca_pistonball.yaml"])
def test_shipped_credit_configs_expand_into_distinct_settings(name):
    from pathlib import Path

    import yaml

    from marlang.evaluation.compare import expand_grid

    data = yaml.safe_load((Path(__file__).parents[4] / "configs" / name).read_text())
    base = build_config(data)
    settings = expand_grid(data, [(k, list(v)) for k, v in base.grid.items()], reference=False)
    assert len(settings) >= 6 and len({s.config.run.seed for s in settings}) == 3
    assert {s.config.learning.options.critic for s in settings} - {"none"}  # a critic in every grid


def test_llm_ranker_config_runs_the_embedded_model_next_to_the_heuristic():
    from pathlib import Path

    import yaml

    from marlang.evaluation.compare import expand_grid

    data = yaml.safe_load((Path(__file__).parents[4] / "configs" / "lca_llm_ranker.yaml").read_text())
    base = build_config(data)
    settings = expand_grid(data, [(k, list(v)) for k, v in base.grid.items()], reference=False)
    assert [s.config.learning.label for s in settings] == ["ippo+lca-llm", "ippo+lca-heuristic"]
    assert all(s.config.learning.options.critic_model == "local:smollm2" for s in settings)


def test_a_critic_is_named_either_way_and_kept_in_one_spelling():
    # the command line's spelling (credit-check --critics llm-mca) is accepted in configs too
    assert _config(method="mappo", critic="llm-mca").learning.options.critic == "llm_mca"
    assert _config(method="mappo", critic="llm-taca").learning.options.critic == "llm_taca"
