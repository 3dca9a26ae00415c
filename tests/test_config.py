from pathlib import Path

import pytest
import yaml

from marlang.config import (
    ConfigError,
    apply_override,
    build_config,
    check_resume_compatible,
    load_config,
    parse_protocol_label,
)
from marlang.envs import make


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
        (["runn.episodes=3"], "unknown config key 'runn' (did you mean 'run'?); valid keys here: env, model, protocol"),
        (["run.episods=3"], "unknown config key 'run.episods' (did you mean 'episodes'?); valid keys here: name"),
        (["env.id=babyai/pikup"], "unknown env id 'babyai/pikup' (did you mean 'babyai/pickup'?); valid choices"),
        (["protocol.name=bidirectonal"], "unknown protocol 'bidirectonal' (did you mean 'bidirectional'?)"),
        (["learning.method=reflxion"], "unknown learning method 'reflxion' (did you mean 'reflexion'?)"),
        (["learning.method=reflexion", "learning.memory_sise=2"],
         "unknown config key 'learning.memory_sise' for learning.method 'reflexion' (did you mean 'memory_size'?)"),
        (["protocol.name=telepathy"], ("invalid value for 'protocol.name': unknown protocol 'telepathy'; valid "
                                      "choices: none, bidirectional, unidirectional, alternating")),
        (["env.id=babyai/dance"], "invalid value for 'env.id': unknown env id 'babyai/dance'; valid choices: "),
        (["model.spec=gpt4"], "invalid value for 'model.spec': unknown model spec 'gpt4'; valid forms: local:..."),
        (["learning.method=dqn"],
         ("invalid value for 'learning.method': unknown learning method 'dqn'; valid choices: none, langmarl, "
          "reflexion")),
        (["learning.method=reflexion", "learning.credit=global"],
         ("unknown config key 'learning.credit' for learning.method 'reflexion'; valid keys here: method, iterations, "
         "rollouts, memory_size, model")),
        (["learning.method=langmarl", "learning.accept=sometimes"],
         "invalid value for 'learning.accept': Input should be 'always' or 'improved'"),
        (["learning.method=langmarl", "learning.eval_rollouts=0"],
         "invalid value for 'learning.eval_rollouts': Input should be greater than or equal to 1"),
        (["learning.method=langmarl", "learning.review=maybe"],
         "invalid value for 'learning.review': Input should be a valid boolean"),
        (["learning.method=reflexion", "learning.accept=improved"],
         ("unknown config key 'learning.accept' for learning.method 'reflexion'; valid keys here: method, "
          "iterations, rollouts, memory_size, model")),
        (["agents.kind=robot"], "invalid value for 'agents.kind'"),
        (["run.episodes=0"], "invalid value for 'run.episodes': Input should be greater than or equal to 1"),
        (["protocol.name=unidirectional", "protocol.speakers=[agent_5]"],
         "protocol.speakers: unknown agent 'agent_5'; valid choices: agent_0, agent_1"),
        (["sandbox.isolation=none"],
         ("invalid value for 'sandbox.isolation': Input should be 'auto', 'namespaces+landlock', "
          "'namespaces', 'landlock' or 'rlimits'")),
        (["sandbox.disk_mb=0"], "invalid value for 'sandbox.disk_mb'"),
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
    from marlang.evaluation.compare import expand_grid

    base = yaml.safe_load(path.read_text())
    config = build_config(base)
    settings = expand_grid(base, [(k, list(v)) for k, v in config.grid.items()])
    assert settings
    for setting in settings:
        # the env's agent count follows its id (pistonball/n10 has 10 agents); a task env's is set
        env = setting.config.env
        generic = {"n_agents": env.n_agents} if env.id == "pistonball" or env.id.startswith(("code/", "qa/")) else {}
        assert len(setting.config.agent_names()) == len(make(env.id, **generic).possible_agents)


RESUMABLE_CHANGES = [
    "run.episodes=50", "run.parallel=4", "run.progress=false", "run.name=longer",
    "learning.iterations=7", "model.max_concurrency=2", "model.timeout=5", "model.max_retries=0",
    "model.cache=false", "model.cache_path=/tmp/other.sqlite", "model.base_url=http://h:1/v1",
    "model.api_key_env=OTHER_KEY", "model.token_limit_field=both", "grid.protocol=[none]",
]


def test_resume_may_change_run_length_and_concurrency():
    saved = load_config(None, ["learning.memory_size=4", "env.kwargs={a: 1}"])
    check_resume_compatible(saved, saved.model_copy(deep=True))
    new = load_config(None, ["learning.memory_size=4", "env.kwargs={a: 1}", *RESUMABLE_CHANGES])
    check_resume_compatible(saved, new)
    check_resume_compatible(new, saved)


@pytest.mark.parametrize(
    "saved, new, key, old_value, new_value",
    [
        ([], ["model.temperature=0.7"], "model.temperature", "0.0", "0.7"),
        ([], ["model.max_tokens=128"], "model.max_tokens", "64", "128"),
        ([], ["model.spec=openai:gpt-4o-mini"], "model.spec", '"local:smollm2"', '"openai:gpt-4o-mini"'),
        ([], ["run.seed=3"], "run.seed", "0", "3"),
        ([], ["env.id=babyai/goto-obj"], "env.id", '"babyai/pickup"', '"babyai/goto-obj"'),
        ([], ["protocol=alternating-2"], "protocol.name", '"none"', '"alternating"'),
        ([], ["agents.policy=Hurry."], "agents.policy", '"Work with', '"Hurry."'),
        ([], ["learning.method=none"], "learning.method", '"reflexion"', '"none"'),
        ([], ["learning.rollouts=2"], "learning.rollouts", "null", "2"),
        (["learning.memory_size=4"], ["learning.memory_size=5"], "learning.memory_size", "4", "5"),
        # a method-specific key set in only one of them
        ([], ["learning.memory_size=3"], "learning.memory_size", "(not set)", "3"),
        (["learning.memory_size=3"], [], "learning.memory_size", "3", "(not set)"),
        # nested dicts are compared key by key
        (["env.kwargs={a: 1, b: 2}"], ["env.kwargs={a: 1, b: 3}"], "env.kwargs.b", "2", "3"),
        (["env.kwargs={a: 1}"], ["env.kwargs={a: 1, c: 0}"], "env.kwargs.c", "(not set)", "0"),
        (["env.kwargs={a: 1}"], ["env.kwargs={a: 1.0}"], "env.kwargs.a", "1", "1.0"),
    ],
)
def test_resume_refuses_changes_to_what_is_measured(saved, new, key, old_value, new_value):
    # a resumable change alongside: the message names the offending key, not that one
    saved_cfg = load_config(None, saved)
    new_cfg = load_config(None, [*new, "run.episodes=99"])
    with pytest.raises(ConfigError) as info:
        check_resume_compatible(saved_cfg, new_cfg)
    message = str(info.value)
    assert "\n" not in message
    assert f"{key!r} is {old_value}" in message and f"but {new_value}" in message
    assert "only run length and concurrency" in message and "new run directory" in message


def test_resume_names_the_first_offending_key():
    saved = load_config(None, [])
    new = load_config(None, ["model.temperature=0.5", "run.seed=9"])
    with pytest.raises(ConfigError, match="'model.temperature'"):
        check_resume_compatible(saved, new)


def test_sandbox_isolation_choices_are_the_sandboxs_levels():
    from typing import get_args

    from marlang.config import SandboxConfig
    from marlang.sandbox import LEVELS

    assert get_args(SandboxConfig.model_fields["isolation"].annotation) == ("auto", *LEVELS)


def test_redact_secrets_hides_passwords_secret_settings_and_secret_values(monkeypatch):
    from marlang.config import redact_secrets

    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghij")
    monkeypatch.setenv("SOME_PATH", "/not/a/secret")
    assert redact_secrets("https://bob:pw123456@host/v1 and http://host/x") == "https://bob:***@host/v1 and http://host/x"
    assert redact_secrets("--set model.api_key=sk-1 --set x.password: hunter2") == \
        "--set model.api_key=*** --set x.password: ***"
    assert redact_secrets('{"token": "abc", "Authorization": "Bearer xyz"}') == \
        '{"token": "***", "Authorization": "Bearer ***"}'
    # names of variables, token counts and other look-alikes stay
    kept = "api_key_env: OPENAI_API_KEY max_tokens: 24 token_limit_field: max_tokens /not/a/secret"
    assert redact_secrets(kept) == kept
    assert redact_secrets("the server said hf_abcdefghij and key-12345678", ["key-12345678"]) == \
        "the server said *** and ***"



@pytest.mark.parametrize("method, old, new", [
    ("ppo", "lam", "gae_lambda"), ("ppo", "clip", "clip_coef"),
    ("ppo", "entropy_coef", "ent_coef"), ("ppo", "value_coef", "vf_coef"),
    ("magrpo", "epsilon", "clip_coef"), ("magrpo", "epsilon_high", "clip_coef_high"),
    ("mappo", "lmbda", "gae_lambda"), ("mappo", "clip_epsilon", "clip_coef"),
    ("mappo", "entropy_coef", "ent_coef"), ("mappo", "critic_coef", "vf_coef"),
    ("qmix", "clip_grad_norm", "max_grad_norm"),
])
def test_a_learning_key_has_one_name_and_another_is_refused_naming_it(method, old, new):
    def config(**keys):
        return build_config({**SECTIONS[method], "learning": {"method": method, **keys}})

    assert getattr(config(**{new: 0.1}).learning.options, new) == 0.1
    with pytest.raises(ConfigError, match=f"unknown config key 'learning.{old}'") as err:
        config(**{old: 0.1})
    assert f" {new}," in str(err.value) or str(err.value).endswith(f" {new}")


SECTIONS = {
    "ppo": {},
    "magrpo": {"env": {"id": "code/humaneval", "n_agents": 2}},
    "mappo": {"agents": {"kind": "neural"}},
    "qmix": {"agents": {"kind": "neural"}},
}


def test_run_seeds_are_a_list_of_distinct_ints():
    assert build_config({"run": {"seeds": [0, 1, 2]}}).run.seeds == [0, 1, 2]
    assert build_config({}).run.seeds is None  # run.seed alone
    assert build_config({"run": {"seed": 1, "seeds": [0, 1]}}).run.seeds == [0, 1]  # run.seed among them


@pytest.mark.parametrize(
    ("seeds", "seed", "expected"),
    [
        ([], 0, "invalid value for 'run.seeds': give at least one seed"),
        ([0, 1, 1], 0, "invalid value for 'run.seeds': seed 1 is listed twice"),
        ([0, "one"], 0, "invalid value for 'run.seeds.1': Input should be a valid integer"),
        ([0, 1.5], 0, "invalid value for 'run.seeds.1'"),
        ([True], 0, "invalid value for 'run.seeds.0'"),
        (3, 0, "invalid value for 'run.seeds': Input should be a valid list"),
        ([0, 1, 2], 5, "invalid value for 'run.seeds': run.seed is 5, not one of run.seeds [0, 1, 2]"),
    ],
)
def test_bad_run_seeds_are_one_line_naming_the_key(seeds, seed, expected):
    with pytest.raises(ConfigError) as info:
        build_config({"run": {"seed": seed, "seeds": seeds}})
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_the_loops_own_keys_are_the_loops_written_under_learning():
    from marlang.config import LoopConfig
    from marlang.methods.langmarl.learner import LangMARLOptions

    cfg = load_config(None, ["learning.method=langmarl", "learning.accept=improved", "learning.eval_rollouts=5",
                             "learning.review=true", "learning.credit=global"])
    assert cfg.learning.loop == LoopConfig(accept="improved", eval_rollouts=5, review=True)
    assert cfg.learning.options.credit == "global"
    assert not {"accept", "eval_rollouts", "review"} & set(LangMARLOptions.model_fields)
    # written where users wrote them: the resolved config keeps them under learning
    again = build_config(yaml.safe_load(cfg.to_yaml()))
    assert again.learning.loop == cfg.learning.loop
    assert load_config(None, ["learning.method=reflexion"]).learning.loop == LoopConfig()


def _number_keys(model, prefix=""):
    """Every dotted key of a number field under ``model``, nested sections included."""
    import typing

    from pydantic import BaseModel

    from marlang.config.sections import _wants_number

    for name, field in model.model_fields.items():
        sections = [a for a in (field.annotation, *typing.get_args(field.annotation))
                    if isinstance(a, type) and issubclass(a, BaseModel)]
        if sections:
            yield from _number_keys(sections[0], f"{prefix}{name}.")
        elif _wants_number(field.annotation):
            yield f"{prefix}{name}"


SECTION_NUMBERS = [k for k in _number_keys(__import__("marlang.config", fromlist=["x"]).ExperimentConfig)
                   if not k.startswith(("team.", "learning."))]


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "inf", "nan"])
@pytest.mark.parametrize("key", SECTION_NUMBERS)
def test_every_number_of_every_section_must_be_finite_and_the_error_names_the_key(key, value):
    overrides = [f"{key}={value}"]
    if key.startswith("model.price."):
        other = "output" if key.endswith("input") else "input"
        overrides = [f"model.price={{{key.rpartition('.')[2]}: {value}, {other}: 1}}"]
    if key.startswith(("graph.", "task.")):  # the rest of a graph's sections, valid
        overrides += ["graph.build=tests.run.graph_app:build_graph", "graph.input=question", "graph.output=answer",
                      "task.data=tests.run.graph_app:problems", "task.reward=tests.run.graph_app:score"]
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    message = str(info.value)
    # a whole-number key refuses the text "inf" as no integer
    assert f"'{key}" in message, message
    assert any(why in message for why in ("not a finite number", "valid integer", "not a size")), message
    assert "\n" not in message


def test_there_are_numbers_of_every_kind_to_check():
    assert {"model.temperature", "model.price.input", "run.resources.cpus", "run.seed"} <= set(SECTION_NUMBERS)


@pytest.mark.parametrize("method", ["langmarl", "reflexion", "mappo", "ippo", "qmix", "vdn", "ppo", "magrpo", "grpo"])
def test_every_number_of_every_learners_options_must_be_finite(method):
    from marlang.config.sections import learning_method

    options = learning_method(method).options_model
    keys = [k for k in _number_keys(options) if "." not in k]
    assert keys
    kind = "neural" if method in ("mappo", "ippo", "qmix", "vdn") else "llm"
    for key in keys:
        with pytest.raises(ConfigError) as info:
            load_config(None, [f"agents.kind={kind}", f"learning.method={method}", f"learning.{key}=.inf"])
        assert f"'learning.{key}'" in str(info.value) and "not a finite number" in str(info.value), str(info.value)


@pytest.mark.parametrize("overrides, expected", [
    (["env.kwargs={size: [1, .nan]}"], "invalid value for 'env.kwargs': nan is not a finite number (at size[1])"),
    (["run.seed=-5"], "invalid value for 'run.seed'"),
    (["run.seed=4294967296"], "invalid value for 'run.seed'"),
    (["run.eval_seed=-1"], "invalid value for 'run.eval_seed'"),
    (["run.seeds=[0, -1]"], "invalid value for 'run.seeds.1'"),
    (["run.name=a/b"], "'a/b' cannot name a folder"),
    (["run.name=.."], "'..' cannot name a folder"),
    (["run.name=''"], "cannot name a folder"),
    ([f"run.name={'x' * 101}"], "cannot name a folder; give a file name of 1 to 100 characters"),
    (['run.name="a\\0b"'], "invalid value for 'run.name': the text holds a NUL character"),
    (['agents.policy="go\\0"'], "invalid value for 'agents.policy': the text holds a NUL character"),
    (['model.cache_path="/tmp/a\\0b"'], "invalid value for 'model.cache_path': the text holds a NUL"),
    (['agents.policies={"agent_0": "x\\0"}'], "NUL character (at agent_0)"),
])
def test_seeds_names_and_texts_a_run_cannot_use_are_refused_naming_the_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))


def test_a_yaml_alias_bomb_is_refused_at_once_in_a_short_line(tmp_path):
    import time

    from marlang.config.loading import load_yaml

    assert len(BILLION_LAUGHS) < 1024
    path = tmp_path / "bomb.yaml"
    path.write_text(BILLION_LAUGHS.replace("a: &a", "z: &a") + "run:\n  name: *i\n")
    for text in (BILLION_LAUGHS, path.read_text()):
        with pytest.raises(yaml.YAMLError, match="aliases expand to more than 100000 values"):
            load_yaml(text)
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert time.monotonic() - started < 5
    assert len(str(info.value)) < 400 and f"{path}:" in str(info.value)
    with pytest.raises(yaml.YAMLError, match="anchor it is inside"):
        load_yaml("a: &a [1, *a]\n")
    # Aliases a config may use, merges included, still load.
    assert load_yaml("base: &b {episodes: 2}\nrun: {<<: *b, name: x}\nother: *b\n")["run"] == {"episodes": 2,
                                                                                            "name": "x"}


def test_an_error_that_echoes_a_long_value_is_shortened():
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"model.price={'x' * 100_000}"])
    assert "is no price" in str(info.value) and "characters left out" in str(info.value)
    assert len(str(info.value)) < 1200
