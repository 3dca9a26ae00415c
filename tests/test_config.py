from pathlib import Path

import pytest
import yaml

from marlang.config import (
    ConfigError,
    apply_override,
    build_config,
    load_config,
    parse_protocol_label,
)
from marlang.envs_text import make


def test_defaults_are_valid_and_overrides_apply(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("env: {id: babyai/pickup, n_agents: 3}\nrun: {episodes: 2}\n")
    cfg = load_config(path, ["run.episodes=5", "protocol=alternating-3", "model.temperature=0.7"])
    assert cfg.env.n_agents == 3
    assert cfg.run.episodes == 5
    assert (cfg.protocol.name, cfg.protocol.rounds, cfg.protocol.label) == ("alternating", 3, "alternating-3")
    assert cfg.model.temperature == 0.7
    assert cfg.agent_names() == ["agent_0", "agent_1", "agent_2"]


def test_round_trips_through_yaml(tmp_path):
    cfg = load_config(None, ["protocol.name=unidirectional", "protocol.speakers=[agent_1]"])
    path = tmp_path / "again.yaml"
    path.write_text(cfg.to_yaml())
    assert load_config(path) == cfg


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["env.colour=red"], "unknown config key 'env.colour'; valid keys here: id, n_agents, max_steps, kwargs"),
        (["runn.episodes=3"], "unknown config key 'runn'; valid keys here: env, model, protocol, agents"),
        (["protocol.name=telepathy"], ("invalid value for 'protocol.name': unknown protocol 'telepathy'; valid "
                                      "choices: none, bidirectional, unidirectional, alternating")),
        (["env.id=babyai/dance"], "invalid value for 'env.id': unknown env id 'babyai/dance'; valid choices: "),
        (["model.spec=gpt4"], "invalid value for 'model.spec': unknown model spec 'gpt4'; valid forms: local:..."),
        (["learning.method=ppo"], "invalid value for 'learning.method': Input should be 'reflexion' or 'none'"),
        (["agents.kind=robot"], "invalid value for 'agents.kind'"),
        (["run.episodes=0"], "invalid value for 'run.episodes': Input should be greater than or equal to 1"),
        (["protocol.name=unidirectional", "protocol.speakers=[agent_5]"],
         "protocol.speakers: unknown agent 'agent_5'; valid choices: agent_0, agent_1"),
    ],
)
def test_invalid_configs_name_the_key_and_the_choices(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_bad_files_and_override_syntax(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("env: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(None, ["episodes"])
    with pytest.raises(ConfigError, match="must be a mapping"):
        build_config(["not", "a", "mapping"])


def test_protocol_labels_and_nested_overrides():
    assert parse_protocol_label("alternating-4") == ("alternating", 4)
    assert parse_protocol_label("bidirectional") == ("bidirectional", None)
    data = {}
    apply_override(data, "env.kwargs.room_size", 6)
    assert data == {"env": {"kwargs": {"room_size": 6}}}
    with pytest.raises(ConfigError, match="is a value"):
        apply_override({"env": 3}, "env.id", "x")


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml")))
def test_every_shipped_config_and_each_grid_setting_is_valid(path):
    from marlang.compare import expand_grid

    base = yaml.safe_load(path.read_text())
    config = build_config(base)
    settings = expand_grid(base, [(k, list(v)) for k, v in config.grid.items()])
    assert settings
    for setting in settings:
        # the env's agent count follows its id (pistonball/n10 has 10 agents)
        assert len(setting.config.agent_names()) == len(make(setting.config.env.id).possible_agents)
