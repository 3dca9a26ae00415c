"""MkDocs hook: generates the reference pages from the code, so they never drift from it.

* ``reference/config.md``: every key of :class:`marlang.config.ExperimentConfig` (its sections
  ``env``, ``model``, ...), and every learning method's own ``learning.*`` keys (the options
  model of each entry in ``marlang.registry.LEARNERS``), with type, default and description.
* ``reference/cli.md``: every subcommand of the ``marlang`` command (``marlang.cli.parser.parser``),
  with its usage and a table of its arguments.

``mkdocs.yml`` names this file under ``hooks:``; :func:`on_files` adds both pages before the
nav is built. :func:`render_config_reference` and :func:`render_cli_reference` return the
Markdown and are what ``tests/test_docs.py`` checks.
"""

from __future__ import annotations

import argparse
import json
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal, Union

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

CONFIG_PAGE = "reference/config.md"
CLI_PAGE = "reference/cli.md"

# Notes for keys whose pydantic Field has no description, or where the docs say more than the
# one-line description. Keyed by dotted key; a learning method's own keys by "method:key"
# (``"*:key"`` for a key of every neural method). Links are relative to reference/config.md.
NOTES: dict[str, str] = {
    "env.id": "Environment id (`marlang envs` lists them).",
    "env.max_steps": "Overcooked counts ticks, Pistonball cycles, the task envs turns.",
    "env.kwargs": "See each environment's page under [Environments](../concepts/envs.md).",
    "model.spec": "See [Models](../concepts/models.md).",
    "model.temperature": "Sampling temperature (0 = greedy); with sampling, each call gets a seed "
    "derived from run seed, episode, step, agent and role.",
    "model.top_p": "Nucleus sampling (1.0: off); see `model.temperature`.",
    "model.base_url": "URL of an OpenAI-compatible server (`openai:` specs); null: OpenAI itself, or "
    "`OPENAI_BASE_URL` from the environment. See [Use a served model](../howto/served-model.md).",
    "model.api_key_env": "The environment variable holding the API key.",
    "model.token_limit_field": "`max_completion_tokens` is what OpenAI's reasoning models need; "
    "`both` sends both fields.",
    "model.timeout": "Deadline in seconds for each whole remote call (connecting and the whole reply).",
    "model.max_retries": "Retries of a remote call (exponential backoff) that timed out, found no server, "
    "got a 5xx or 429, a cut or malformed body, no choices, or a connection closed mid-reply; a server "
    "still failing ends the run (exit 3) after every finished episode has been saved.",
    "model.adapters": "See [Weight-space training](../concepts/learners.md#play-a-trained-team-back).",
    "model.price": "E.g. `{input: 0.15, output: 0.60}`; both keys, non-negative. Each table row's price "
    "counts every call of the run (acting, speaking, learner roles, checks, held-out evaluation, tree "
    "sampling) by its model; a row with a model left unpriced says so instead of a partial price. See "
    "[Score against cost](../howto/many-seeds.md#score-against-cost).",
    "protocol.name": "See [Conversation protocols](../concepts/protocols.md).",
    "agents.chain_of_thought": "Think (one sentence) before answering the action.",
    "agents.action_selection": "See [Agents and actions](../concepts/agents.md).",
    "learning.method": "See [Learners](../concepts/learners.md); a method's own keys are listed "
    "[below](#method-keys).",
    "learning.iterations": "See [how run.episodes relates](../concepts/learners.md#iterations-and-episodes).",
    "run.name": "Names the default run directory: `runs/<run.name>-<time>` (`marlang compare`: "
    "`runs/<run.name>-compare`).",
    "run.episodes": "Training episodes; with `learning.iterations` set it follows: iterations x K "
    "(see [Learners](../concepts/learners.md#iterations-and-episodes)).",
    "run.seed": "Run seed: derives the run's own streams of environment seeds (training, candidate "
    "checks; two run seeds share no level), its LLM sampling seeds and, unless set, `learning.seed`; "
    "to run several, give `run.seeds` (see [Compare settings and seeds](../howto/many-seeds.md#seeds)).",
    "run.eval_seed": "Derives the held-out evaluation's environment seeds: one fixed set for every "
    "`run.seed` unless changed (see [Compare settings and seeds](../howto/many-seeds.md#seeds)).",
    "run.seeds": "E.g. `[0, 1, 2]`, distinct; the same as a grid over `run.seed`. A table row is "
    "over all its seeds' episodes together: a success rate with Wilson's interval on the pooled counts, "
    "the mean and IQM of the others with bootstrap intervals. "
    "`marlang compare --seeds 0,1,2` sets "
    "it; a `run.seed` other than 0 must be one of them. See "
    "[Compare settings and seeds](../howto/many-seeds.md#seeds).",
    "run.progress": "Show a progress bar of the episodes.",
    "run.loggers": "Another name is refused, listing the valid ones; may change on resume "
    "(`tensorboard --logdir runs`).",
    "grid": "Every combination of the keys' values runs. The key `setting` takes mappings that "
    "change several keys together, each with a row `name` (`{name: mappo, agents.kind: neural, "
    "learning: {method: mappo}}`), so LLM teams and neural learners share one table "
    "(`configs/compare_babyai_goto.yaml`). See [Compare settings and seeds](../howto/many-seeds.md).",
    # learning methods' own keys
    "langmarl:credit": "See [LangMARL](../concepts/learners.md#langmarl).",
    "langmarl:model": "A model section (the same keys as [`model`](#model)); null: `model`. E.g. a "
    "stronger served model for the critic.",
    "langmarl:critic_max_tokens": "Budget of the critic's reply.",
    "langmarl:policy_max_words": "Length the optimizer is asked to keep a policy within.",
    "reflexion:model": "A model section (the same keys as [`model`](#model)); null: `model`.",
    "*:activation": "Activation of the MLPs.",
    "*:clip_coef": "PPO ratio clip (BenchMARL's `clip_epsilon`).",
    "*:ent_coef": "Entropy bonus coefficient (BenchMARL's `entropy_coef`).",
    "*:vf_coef": "Critic (value) loss coefficient (BenchMARL's `critic_coef`).",
    "*:gae_lambda": "GAE lambda (BenchMARL's `lmbda`).",
    "*:max_grad_norm": "Gradient norm clip; null: off (BenchMARL's `clip_grad_val`).",
    "*:critic": "See [Neural MARL learners](../howto/neural-learners.md#per-agent-credit).",
    "*:reward_hook": "See [Neural MARL learners](../howto/neural-learners.md#reward-hook).",
    "ppo:gamma": "Discount.",
    "ppo:ent_coef": "Entropy bonus coefficient.",
    "ppo:vf_coef": "Value loss coefficient.",
    "ppo:gae_lambda": "GAE lambda.",
    "ppo:clip_coef": "Ratio clip, also the value clip.",
    "magrpo:clip_coef": "Ratio clip of the ratio losses (TRL's `epsilon`).",
    "magrpo:clip_coef_high": "High-side ratio clip (TRL's `epsilon_high`).",
    "ppo:gradient_checkpointing": "Recompute activations in the backward pass: less memory, "
    "more time per update.",
    "ppo:lora": "LoRA hyper-parameters of every adapter (GLAM: r 16, alpha 32 on q and v).",
    "ppo:lora.r": "LoRA rank.",
    "ppo:lora.alpha": "LoRA scale numerator (scale = alpha / r).",
    "ppo:lora.dropout": "LoRA dropout.",
    "ppo:lora.targets": "Modules to adapt; a target the model lacks is refused, naming the ones it has.",
    "ppo:lora.layers": "Adapt only the last N transformer layers (null: every layer), so backward "
    "stops below them (a cheaper update).",
    "ppo:temperature": "See [PPO](../concepts/learners.md#ppo).",
}

INTRO = """\
# Configuration reference

*This page is generated from the code (`marlang/config/sections.py` and each learning method's options
model) when the site is built.*

Configs are YAML with six sections (`env`, `model`, `protocol`, `agents`, `learning`, `run`),
an optional `sandbox` (how the coding envs confine generated code) and an optional `grid`;
unknown keys and invalid values stop with one line naming the key and the valid choices (with
"did you mean ...?" for a near miss; a YAML error names its line and column). Override any value
with `--set section.key=value`, and remove one the file sets with `--unset section.key` (e.g.
`--set learning.method=none --unset learning.memory_size`). In a grid over learning methods, a
method's own keys apply only to that method's settings (`--grid learning.method=none,reflexion`
works on a config that sets `learning.memory_size`, a Reflexion key). `marlang --version`
prints the version.

In configs and grids, `protocol=alternating-2` is shorthand for
`protocol: {name: alternating, rounds: 2}`. A resumed run may change only its length,
concurrency and how the model is reached: {resume}.
"""


# ----------------------------------------------------------------------------- formatting


def _code(text: str) -> str:
    """``text`` as inline code, safe inside a Markdown table cell."""
    text = text.replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def format_type(annotation: Any) -> str:
    """A short, readable name of a field's type: ``int``, ``int or null``, ``'a' | 'b'``."""
    if annotation is None or annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:  # constraints (strict, ge=1) are the description's to say
        return format_type(args[0])
    if origin is Literal:
        return " \\| ".join(json.dumps(a) if not isinstance(a, str) else f"'{a}'" for a in args)
    if origin in (Union, types.UnionType):
        parts = [format_type(a) for a in args if a is not type(None)]
        joined = " or ".join(parts)
        return f"{joined} or null" if type(None) in args else joined
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(format_type(a) for a in args)}]" if args else name
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "section"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def format_default(field: Any) -> str:
    """The field's default as YAML would read it (``null``, ``true``, ``[agent_0]``)."""
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:  # factories that take the validated data
            return "(computed)"
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    return json.dumps(_plain(value), default=str)


def _is_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model ``annotation`` is (or is optionally), else None."""
    candidates = [annotation, *typing.get_args(annotation)]
    for c in candidates:
        if isinstance(c, type) and issubclass(c, BaseModel):
            return c
    return None


def _description(field: Any, note: str | None) -> str:
    text = (field.description or "").strip()
    if note:
        if text and not text.endswith((".", "!", "?", ")")):
            text += "."
        text = f"{text} {note}" if text else note
    return _cell(text)


def _rows(model: type[BaseModel], prefix: str, note_for: Any, expand: Iterable[str] = (),
          anchor_prefix: str = "", only: Iterable[str] | None = None) -> list[str]:
    """Table rows of ``model``'s fields (those in ``only``, when given) as ``prefix.key``; fields
    named in ``expand`` whose type is a model get one row each of their own keys too. Each row
    carries an anchor: the dotted key, after ``anchor_prefix:`` when given (a learning method's
    keys: ``ppo:learning.lr``), so that no two rows share an id."""
    rows = []
    keep = None if only is None else set(only)
    for name, field in model.model_fields.items():
        if keep is not None and name not in keep:
            continue
        key = f"{prefix}.{name}" if prefix else name
        anchor = f'<a id="{anchor_prefix}:{key}"></a>' if anchor_prefix else f'<a id="{key}"></a>'
        rows.append(f"| {anchor}{_code(key)} | {format_type(field.annotation)} | "
                    f"{_code(format_default(field))} | {_description(field, note_for(name))} |")
        sub = _is_model(field.annotation)
        if sub is not None and name in expand:
            rows += _rows(sub, key, lambda n, parent=name: note_for(f"{parent}.{n}"),
                          anchor_prefix=anchor_prefix)
    return rows


TABLE_HEAD = ["| key | type | default | description |", "|---|---|---|---|"]


def _registered(names: dict[str, str]) -> list[str]:
    return [f"- `{name}`: {_cell(description)}" for name, description in names.items()]


# ----------------------------------------------------------------------------- config page


def config_sections() -> dict[str, type[BaseModel] | None]:
    """The top-level keys of ``ExperimentConfig``: section name -> its model (None for a plain
    key such as ``grid``)."""
    from marlang.config import ExperimentConfig

    return {name: _is_model(f.annotation) for name, f in ExperimentConfig.model_fields.items()}


def learning_methods() -> dict[str, tuple[str, Any]]:
    """Registered learning methods: name -> (description, loaded entry)."""
    from marlang.registry import LEARNERS

    described = LEARNERS.describe()
    return {name: (described[name], LEARNERS.load(name)) for name in LEARNERS}


def render_config_reference() -> str:
    """The Markdown of the configuration reference page."""
    from marlang.config import RESUME_MAY_CHANGE, ExperimentConfig
    from marlang.registry import ENVS, PROTOCOLS

    resume = ", ".join(f"`{k}`" for k in RESUME_MAY_CHANGE)
    out = [INTRO.replace("{resume}", resume)]
    sections = config_sections()
    out.append("Sections: " + ", ".join(f"[`{name}`](#{name})" for name in sections) + ".\n")
    plain = []
    for name, model in sections.items():
        if model is None:
            plain.append(name)
            continue
        out.append(f"## {name} {{#{name}}}\n")
        doc = (model.__doc__ or "").strip().split("\n\n")[0]
        if doc:
            out.append(" ".join(doc.split()) + "\n")
        out += TABLE_HEAD
        out += _rows(model, name, lambda key, section=name: NOTES.get(f"{section}.{key}"),
                     expand=("resources",))  # run.resources: its own keys, each a row
        if name == "learning":  # the loop's own keys, taken by methods that rewrite policy texts
            from marlang.config import LoopConfig

            out += _rows(LoopConfig, name, lambda key: f"The loop's key (`LoopConfig`), taken by {_loop_methods()}.")
        out.append("")
        if name == "env":
            out.append("Registered environment ids (`env.id`):\n")
            out += _registered(ENVS.describe())
            out.append("")
        if name == "protocol":
            out.append("Registered protocols (`protocol.name`):\n")
            out += _registered(PROTOCOLS.describe())
            out.append("")
    for name in plain:
        field = ExperimentConfig.model_fields[name]
        out.append(f"## {name} {{#{name}}}\n")
        out += TABLE_HEAD
        out.append(f'| <a id="{name}"></a>{_code(name)} | {format_type(field.annotation)} | '
                   f"{_code(format_default(field))} | {_description(field, NOTES.get(name))} |")
        out.append("")
        if name == "team":
            from marlang.config import SlotConfig

            out.append("A slot's own keys (`team.<slot>.<key>`, e.g. `team.agent_1.kind`); a key left out "
                       "takes the top-level `agents` (or `model`) setting:\n")
            out += TABLE_HEAD
            out += _rows(SlotConfig, "team.<slot>", lambda key: None)
            out.append("")
    out.append(_render_methods())
    return "\n".join(out).rstrip() + "\n"


def _loop_methods() -> str:
    """The learning methods that take the loop's own keys (``learning.accept``, ...)."""
    from marlang.config import LoopConfig, method_keys

    loop = next(iter(LoopConfig.model_fields))
    return ", ".join(f"`{n}`" for n, (_, entry) in learning_methods().items() if loop in method_keys(entry))


def _same_field(a: Any, b: Any) -> bool:
    return (a.annotation == b.annotation and format_default(a) == format_default(b)
            and (a.description or "") == (b.description or ""))


def _render_methods() -> str:
    """Each learning method's own ``learning.*`` keys. Keys that every method of one kind
    (``llm``, ``neural``) declares alike are listed once for that kind; methods sharing one
    options model share one table."""
    from marlang.registry import LEARNERS

    out = ["## Learning methods' own keys {#method-keys}\n",
           ("Keys of `learning` other than `method`, `iterations`, `rollouts` and the loop's own "
            "(`accept`, `eval_rollouts`, `review`: [learning](#learning)) belong to the "
            "method and are checked against it: a key of another method is an error naming the "
            "valid keys. Registered methods (`marlang learners`):\n")]
    methods = learning_methods()
    kinds = {name: LEARNERS.entry(name).metadata.get("agents_kind", "llm") for name in methods}
    out += [f"- [`{name}`](#learning-{name}) ({kinds[name]} agents): {_cell(desc)}"
            for name, (desc, _) in methods.items()]
    out.append("")

    def note_for(method: str, neural: bool) -> Any:
        def find(key: str) -> str | None:
            found = NOTES.get(f"{method}:{key}")
            if found is None and neural:
                found = NOTES.get(f"*:{key}")
            return found
        return find

    # options model -> the methods using it, in registration order
    groups: dict[type[BaseModel], list[str]] = {}
    for name, (_, entry) in methods.items():
        groups.setdefault(entry.options_model, []).append(name)
    # keys every options model of one kind declares alike
    common: dict[str, list[str]] = {}
    for kind in dict.fromkeys(kinds.values()):
        models = [m for m, names in groups.items() if kinds[names[0]] == kind]
        if len(models) < 2:
            continue
        first = models[0].model_fields
        common[kind] = [k for k, f in first.items()
                        if all(k in m.model_fields and _same_field(f, m.model_fields[k]) for m in models[1:])]
    shown_common: set[str] = set()
    for model, names in groups.items():
        kind = kinds[names[0]]
        shared = common.get(kind, [])
        if shared and kind not in shown_common:
            shown_common.add(kind)
            all_names = [n for n in methods if kinds[n] == kind]
            out.append(f"### Every {kind} method ({', '.join(all_names)}) {{#learning-{kind}}}\n")
            out += TABLE_HEAD
            out += _rows(model, "learning", note_for(names[0], kind == "neural"), anchor_prefix=kind,
                         only=shared)
            out.append("")
        out.append(f"### learning.method: {', '.join(names)} {{#learning-{names[0]}}}\n")
        if len(names) > 1:
            out.append(" ".join(f'<a id="learning-{n}"></a>' for n in names[1:]) + "\n")
        own = [k for k in model.model_fields if k not in shared]
        if own or not shared:
            from marlang.config import LoopConfig, method_keys

            if next(iter(LoopConfig.model_fields)) in method_keys(methods[names[0]][1]):
                out.append("The loop's own keys ([`learning.accept`, `learning.eval_rollouts`, "
                           "`learning.review`](#learning)), and:\n")
        if shared:
            out.append(f"The keys of [every {kind} method](#learning-{kind}), and:\n" if own else
                       f"The keys of [every {kind} method](#learning-{kind}), no others.\n")
        if not own:
            if not shared:
                out.append("No keys of its own.\n")
            continue
        expand = [n for n in own if (sub := _is_model(model.model_fields[n].annotation)) is not None
                  and sub.__name__ != "ModelConfig"]
        out += TABLE_HEAD
        out += _rows(model, "learning", note_for(names[0], kind == "neural"), expand,
                     anchor_prefix=names[0], only=own)
        out.append("")
    return "\n".join(out)


# ----------------------------------------------------------------------------- CLI page


def cli_parser() -> argparse.ArgumentParser:
    """The ``marlang`` command's parser, as ``marlang.cli.dispatch`` builds it."""
    from marlang.cli.dispatch import _version
    from marlang.cli.parser import parser

    return parser(_version())


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Subcommand name -> (its help line, its parser), in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (helps.get(name, ""), sub) for name, sub in action.choices.items()}
    return {}


def _wide(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=100)


CLI_NOTES: dict[str, str] = {
    "compare config": "YAML config (its `grid:` section is the default grid)",
    "compare --set": "override a config value, e.g. --set run.episodes=5",
    "review run_dir": "the run directory paused for review",
    "report run_dir": "a run directory or a comparison directory",
}
"""Help for arguments that ``marlang.cli.parser`` declares without one, keyed "subcommand dest-or-option"."""


def _argument_rows(parser: argparse.ArgumentParser, command: str = "") -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            metavar = action.metavar or (action.dest.upper() if action.nargs != 0 else None)
            names = ", ".join(f"{o} {metavar}" if metavar else o for o in action.option_strings)
            note_key = f"{command} {action.option_strings[-1]}"
        else:
            names = action.metavar or action.dest
            note_key = f"{command} {action.dest}"
        text = (action.help or CLI_NOTES.get(note_key, "")).replace("%(prog)s", parser.prog)
        notes = []
        if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
            notes.append("repeatable")
        if action.nargs == "?" and "optional" not in text:
            notes.append("optional")
        if notes:
            text = f"{text} ({', '.join(notes)})" if text else f"({', '.join(notes)})"
        default = action.default
        shown = "" if default in (None, False, [], argparse.SUPPRESS) else _code(str(default))
        rows.append(f"| {_code(names)} | {shown} | {_cell(text)} |")
    return rows


def render_cli_reference() -> str:
    """The Markdown of the command-line reference page."""
    parser = cli_parser()
    _wide(parser)
    subs = subcommands(parser)
    out = ["# Command-line reference\n",
           "*This page is generated from `marlang/cli/parser.py` when the site is built.*\n",
           (f"`{parser.prog}`: {parser.description or ''} Bad input ends with one line naming "
            "what to fix and a non-zero exit, never a traceback.\n"),
           "```text", parser.format_usage().strip(), "```\n",
           "| option | default | meaning |", "|---|---|---|", *_argument_rows(parser), "",
           "Subcommands:\n"]
    out += [f"- [`{parser.prog} {name}`](#{name}): {_cell(help_)}" for name, (help_, _) in subs.items()]
    out.append("")
    for name, (help_, sub) in subs.items():
        _wide(sub)
        out.append(f"## {parser.prog} {name} {{#{name}}}\n")
        if help_:
            out.append(_cell(help_[0].upper() + help_[1:]) + ".\n")
        out += ["```text", sub.format_usage().strip(), "```\n"]
        rows = _argument_rows(sub, name)
        if rows:
            out += ["| argument | default | meaning |", "|---|---|---|", *rows, ""]
    return "\n".join(out).rstrip() + "\n"


# ----------------------------------------------------------------------------- the hook


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages to the site's files (MkDocs >= 1.6)."""
    from mkdocs.structure.files import File

    for path, render in ((CONFIG_PAGE, render_config_reference), (CLI_PAGE, render_cli_reference)):
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=render()))
    return files
