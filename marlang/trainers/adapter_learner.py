"""Former home of the weight-space trainer template, now ``marlang.trainers.template``; kept so
old imports work for one release."""

from __future__ import annotations

import warnings

from marlang.trainers.template import (  # noqa: F401 - re-exported
    INITIAL_STATE,
    SEED_OFFSET,
    AdapterLearner,
    AdapterOptions,
    clip_gradients,
    load_tensors,
)

warnings.warn("marlang.trainers.adapter_learner is deprecated: use marlang.trainers.template",
              DeprecationWarning, stacklevel=2)
