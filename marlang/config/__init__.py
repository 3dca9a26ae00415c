"""Typed experiment configs: YAML files plus dotted ``--set a.b=v`` overrides.

Every section forbids unknown keys, so a typo fails fast with a message naming the key
and the valid ones (see :func:`describe_validation_error`). The sections are in
``sections``, the whole config in ``experiment``, the team's slots in ``team``, reading files
and overrides in ``loading``, masking secrets in ``secrets``.

Names that higher layers implement (``env.id``, ``protocol.name``, ``learning.method`` and a
method's own ``learning.*`` keys) are checked against the registries of :mod:`marlang.registry`,
the one layer below this package: config never imports envs, graphs, learners or trainers. A
learning method given as an entry point is imported when a config names it, but not when the
config was read from a directory (:func:`load_saved_config`: a run's ``config.yaml`` may be a
stranger's) unless the command runs with ``--trust-imports``.
"""

from marlang.config.experiment import ExperimentConfig
from marlang.config.loading import (
    RESUME_MAY_CHANGE,
    UntrustedImportError,
    apply_override,
    apply_overrides,
    build_config,
    build_saved_config,
    check_resume_compatible,
    config_difference,
    describe_validation_error,
    load_config,
    load_saved_config,
    parse_value,
    read_config_file,
    remove_key,
)
from marlang.config.secrets import (
    REDACTED,
    redact_secrets,
)
from marlang.config.sections import (
    RUN_LOGGERS,
    AgentsConfig,
    ConfigError,
    EnvConfig,
    LearningConfig,
    LoopConfig,
    ModelConfig,
    NumbersNotBooleans,
    ProtocolConfig,
    ResourcesConfig,
    RunConfig,
    SandboxConfig,
    check_name,
    did_you_mean,
    learning_method,
    method_keys,
    parse_protocol_label,
    trains_weights,
)
from marlang.config.team import Slot, SlotConfig, slot_player

__all__ = [
    "REDACTED",
    "RESUME_MAY_CHANGE",
    "RUN_LOGGERS",
    "AgentsConfig",
    "ConfigError",
    "EnvConfig",
    "ExperimentConfig",
    "LearningConfig",
    "LoopConfig",
    "ModelConfig",
    "NumbersNotBooleans",
    "ProtocolConfig",
    "ResourcesConfig",
    "RunConfig",
    "SandboxConfig",
    "Slot",
    "SlotConfig",
    "UntrustedImportError",
    "apply_override",
    "apply_overrides",
    "build_config",
    "build_saved_config",
    "check_name",
    "check_resume_compatible",
    "config_difference",
    "describe_validation_error",
    "did_you_mean",
    "learning_method",
    "load_config",
    "load_saved_config",
    "method_keys",
    "parse_protocol_label",
    "parse_value",
    "read_config_file",
    "redact_secrets",
    "remove_key",
    "slot_player",
    "trains_weights",
]
