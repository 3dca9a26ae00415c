"""Configs from YAML files and dotted ``--set a.b=v`` overrides, validation errors in one
line, and the keys a resumed run may change."""

from __future__ import annotations

import copy
import json
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from marlang.config.experiment import ExperimentConfig
from marlang.config.sections import (
    ConfigError,
    _protocol_section,
    did_you_mean,
    error_message,
    parse_protocol_label,
)
from marlang.config.team import SlotConfig
from marlang.registry import TRUST_IMPORTS_FLAG, untrusted_config


class _ConfigLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping (PyYAML keeps the
    last one silently); a key a merge (``<<: *base``) brings in may be overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping (first on line "
                    f"{seen[key].line + 1}); give it once", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


YAML_MAX_VALUES = 100_000
"""The most values a YAML document may hold once its aliases are expanded: a config holds a
few hundred, and a few aliases nested in each other (a "billion laughs") expand to billions."""


def load_yaml(text: str) -> Any:
    """``text`` as YAML: a key given twice in one mapping is a ``yaml.YAMLError``, and so are
    nesting too deep for the parser (which would otherwise overflow Python's stack), aliases
    that expand past `YAML_MAX_VALUES` values, and an alias inside its own anchor."""
    loader = _ConfigLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {})
        return loader.construct_document(node)
    except RecursionError:
        raise yaml.YAMLError("nested too deeply (thousands of levels); a config is a few levels deep") from None
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, sizes: dict[int, int | None]) -> int:
    """How many values ``node`` holds with every alias expanded (each anchored node is counted
    once, so this takes time in the document's size, not the expansion's); a
    ``yaml.YAMLError`` past `YAML_MAX_VALUES`."""
    if id(node) in sizes:
        size = sizes[id(node)]
        if size is None:
            raise yaml.composer.ComposerError(None, None, "an alias refers to the anchor it is inside (a value "
                                              "that holds itself); give the value itself", node.start_mark)
        return size
    sizes[id(node)] = None  # being counted: an alias back to it is a cycle
    children = node.value if isinstance(node, yaml.SequenceNode) else \
        [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
    size = 1
    for child in children:
        size += _expanded_size(child, sizes)
        if size > YAML_MAX_VALUES:
            raise yaml.composer.ComposerError(
                None, None, f"its aliases expand to more than {YAML_MAX_VALUES} values (a config holds a few "
                "hundred); give the values without nesting aliases in each other", node.start_mark)
    sizes[id(node)] = size
    return size


def parse_value(text: str) -> Any:
    """Parse an override value the way YAML would (``3`` -> int, ``true`` -> bool, ``[a,b]``)."""
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return text


def apply_override(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data[a][b] = value`` for ``dotted == "a.b"``, creating sections as needed.

    ``protocol=alternating-2`` is accepted as shorthand for ``protocol.name=alternating``
    plus ``protocol.rounds=2``.
    """
    if isinstance(data.get("protocol"), str):  # the shorthand in a config file, as a section
        data["protocol"] = _protocol_section(data["protocol"])
    if dotted == "protocol":
        name, rounds = parse_protocol_label(str(value))
        section = data.setdefault("protocol", {})
        section["name"] = name
        if rounds is not None:
            section["rounds"] = rounds
        return
    keys = dotted.split(".")
    node = data
    for k in keys[:-1]:
        nxt = node.get(k)
        if nxt is None:
            nxt = node[k] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"cannot set {dotted!r}: {k!r} is a value, not a section")
        node = nxt
    last = keys[-1]
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        # A section given as a mapping (e.g. a grid over learning: {method: ..., credit: ...})
        # updates the section, keeping its other keys.
        node[last] = {**node[last], **value}
        return
    node[last] = value


def describe_validation_error(err: ValidationError) -> str:
    """One line naming the offending key and, where known, the valid choices."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    kind = first["type"]
    if kind == "extra_forbidden":
        parent_model = _section_for(first["loc"][:-1])
        fields = list(parent_model.model_fields) if parent_model else []
        hint = did_you_mean(str(first["loc"][-1]), fields)
        return f"unknown config key {loc!r}{hint}; valid keys here: {', '.join(fields) or '?'}"
    msg = error_message(_section_for(first["loc"][:-1]), first)
    if msg.startswith(("unknown config key '", "invalid value for '")):
        return msg  # already names the nested key (method-specific learning keys)
    if kind == "literal_error":
        return f"invalid value for {loc!r}: {msg}"
    if loc:
        return f"invalid value for {loc!r}: {msg}"
    return f"invalid config: {msg}"


def _section_for(path: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = ExperimentConfig
    if len(path) >= 2 and path[0] == "team":  # team.<slot>: a slot's own keys
        model, path = SlotConfig, path[2:]
    for p in path:
        field = model.model_fields.get(str(p))
        # an optional section (``ModelPrice | None``) is its model
        found = [a for a in (field.annotation, *typing.get_args(field.annotation)) if isinstance(a, type)
                 and issubclass(a, BaseModel)] if field is not None else []
        if not found:
            return None
        model = found[0]
    return model


def build_config(data: dict[str, Any]) -> ExperimentConfig:
    """Validate a plain dict into an :class:`ExperimentConfig`, raising :class:`ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError("config must be a mapping with sections env, model, protocol, agents, learning, run")
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err)) from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML config file; a missing file, a directory, malformed YAML (a key
    given twice, nesting thousands of levels deep) or an empty file is a :class:`ConfigError`
    naming the file (and the line and column of a YAML error)."""
    p = Path(path)
    if p.is_dir():
        configs = sorted(str(c) for c in p.glob("*.y*ml"))
        hint = f"; config files there: {', '.join(configs[:8])}{', ...' if len(configs) > 8 else ''}" if configs else ""
        raise ConfigError(f"{p} is a directory, not a config file{hint}")
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        data = load_yaml(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p}: not a text file (byte {err.start} is not UTF-8); give a YAML config") from None
    except OSError as err:
        raise ConfigError(f"{p}: cannot be read ({err.strerror or err})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: not valid YAML: {problem}{f' ({context})' if context else ''}") from None
    if data is None:
        # Not the defaults: an empty file is more likely a mistake than a wish for a full default run.
        raise ConfigError(f"{p}: the config is empty; give the sections it sets, e.g. env: {{id: babyai/pickup}} "
                          "(an empty mapping, {}, runs every default)")
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a config must be a mapping with sections env, model, protocol, agents, learning, run")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str] | None = None,
                    unset: list[str] | None = None) -> dict[str, Any]:
    """Apply ``--unset KEY`` (first) and ``--set KEY=VALUE`` items to ``data`` in place."""
    for key in unset or []:
        remove_key(data, key.strip())
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like section.key=value")
        apply_override(data, key.strip(), parse_value(raw))
    return data


def remove_key(data: dict[str, Any], dotted: str) -> None:
    """Delete ``data[a][b]`` for ``dotted == "a.b"`` (``--unset``): the key takes its default,
    or, for a learning method's own key, goes away. A key that is not set is an error."""
    keys = dotted.split(".")
    node: Any = data
    for k in keys[:-1]:
        node = node.get(k) if isinstance(node, dict) else None
    if not isinstance(node, dict) or keys[-1] not in node:
        where = node if isinstance(node, dict) else {}
        raise ConfigError(f"--unset {dotted}: the config does not set {dotted!r}"
                          f"{did_you_mean(keys[-1], where)}")
    del node[keys[-1]]


def load_config(path: str | Path | None = None, overrides: list[str] | None = None,
                unset: list[str] | None = None) -> ExperimentConfig:
    """Load a YAML config (or the defaults when ``path`` is None), remove the ``unset`` keys
    and apply ``a.b=v`` overrides."""
    data = copy.deepcopy(read_config_file(path)) if path is not None else {}
    return build_config(apply_overrides(data, overrides, unset))


# ---------------------------------------------------------------------------------------
# Configs read from directories

class UntrustedImportError(ConfigError):
    """A config read from a directory names a plugin by import path, refused (one line)."""


def load_saved_config(path: str | Path, overrides: list[str] | None = None,
                      unset: list[str] | None = None, *, beside: ExperimentConfig | None = None) -> ExperimentConfig:
    """:func:`load_config` of a config marlang finds in a directory (a run's ``config.yaml``),
    not one the user names: its import paths are refused (see :func:`build_saved_config`)."""
    data = apply_overrides(copy.deepcopy(read_config_file(path)), overrides, unset)
    return build_saved_config(data, path, beside=beside)


def build_saved_config(data: dict[str, Any], source: str | Path, *,
                       beside: ExperimentConfig | None = None) -> ExperimentConfig:
    """:func:`build_config` of a config read from a directory (``source``: its file), which may
    be a stranger's: a plugin it names by import path is refused, in one line naming the key
    and the path, before anything is imported, unless the command runs with --trust-imports
    (:func:`marlang.registry.trusting_imports`) or the config the user gave (``beside``: the
    one a resumed run is checked against) names the same path. Registered and installed
    plugins' names load."""
    allowed = _texts(beside.model_dump(mode="json")) if beside is not None else set()
    with untrusted_config(str(source), allowed) as refused:
        try:
            return build_config(data)
        except Exception:  # whatever a refusal became on its way up, the refusal is the cause
            if not refused:
                raise
    path = refused[0]
    raise UntrustedImportError(
        f"{source}: {_key_holding(data, path) or 'a key'} is the import path {path!r}, and marlang imports "
        "no code named by a config it reads from a directory (a run directory is data, never code): refused, "
        f"nothing was imported; if you trust the code it names, add {TRUST_IMPORTS_FLAG} to the command")


def _texts(data: Any) -> set[str]:
    """Every string among the values of ``data``, nested ones too."""
    if isinstance(data, dict):
        return set().union(*(_texts(v) for v in data.values()))
    if isinstance(data, list):
        return set().union(*(_texts(v) for v in data))
    return {data} if isinstance(data, str) else set()


def _key_holding(data: Any, value: str, prefix: str = "") -> str | None:
    """The dotted key of ``data`` whose value is ``value`` (``protocol.name``), or None."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, found in items:
        path = f"{prefix}[{key}]" if isinstance(data, list) else f"{prefix}{'.' if prefix else ''}{key}"
        if found == value:
            return path
        inner = _key_holding(found, value, path)
        if inner is not None:
            return inner
    return None


# ---------------------------------------------------------------------------------------
# Resuming

RESUME_MAY_CHANGE = (
    "run.episodes",
    "run.parallel",
    "run.progress",
    "run.name",
    "run.loggers",
    "run.threads",
    "run.resources",
    "learning.iterations",
    "model.max_concurrency",
    "model.timeout",
    "model.max_retries",
    "model.cache",
    "model.cache_path",
    "model.base_url",
    "model.api_key_env",
    "model.token_limit_field",
    "model.price",
    "grid",
)
"""Keys a resumed run may change: its length, concurrency, how the model is reached, and
what its tokens cost."""

_ABSENT = object()


def check_resume_compatible(saved: ExperimentConfig, new: ExperimentConfig) -> None:
    """Raise :class:`ConfigError` if ``new`` changes what ``saved``'s run measures.

    Only the keys in :data:`RESUME_MAY_CHANGE` (and everything under them) may differ;
    every other key, nested ones included (``env.kwargs.*``, a learner's own keys), must be
    equal, and a key set in one config but not the other is a difference. The message names
    the first offending key with its saved and new values.
    """
    difference = config_difference(saved, new)
    if difference is None:
        return
    key, old, now = difference
    raise ConfigError(
        f"cannot resume: {key!r} is {old} in the saved run but {now} now; only "
        "run length and concurrency (run.episodes, learning.iterations, run.parallel, "
        "model.max_concurrency, ...) may change on resume; start a new run directory instead"
    )


def config_difference(saved: ExperimentConfig, new: ExperimentConfig,
                      also_may_change: tuple[str, ...] = ()) -> tuple[str, str, str] | None:
    """The first key (dotted) where ``new`` changes what ``saved`` measures, with its saved
    and new values as JSON (``(not set)`` where absent); None if none does. Keys under
    :data:`RESUME_MAY_CHANGE` and ``also_may_change`` may differ."""
    found = _first_difference(saved.model_dump(mode="json"), new.model_dump(mode="json"), "",
                              (*RESUME_MAY_CHANGE, *also_may_change))
    return None if found is None else (found[0], _show(found[1]), _show(found[2]))


def _first_difference(saved: Any, new: Any, prefix: str, may_change: tuple[str, ...]) -> tuple[str, Any, Any] | None:
    for key in [*saved, *(k for k in new if k not in saved)]:
        path = f"{prefix}{key}"
        if any(path == k or path.startswith(k + ".") for k in may_change):
            continue
        old, now = saved.get(key, _ABSENT), new.get(key, _ABSENT)
        if isinstance(old, dict) and isinstance(now, dict):
            found = _first_difference(old, now, path + ".", may_change)
            if found is not None:
                return found
        elif old != now or type(old) is not type(now):
            return path, old, now
    return None


def _show(value: Any) -> str:
    return "(not set)" if value is _ABSENT else json.dumps(value)


# Secrets ----------------------------------------------------------------------------------------
