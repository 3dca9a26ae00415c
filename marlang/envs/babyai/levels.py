"""The built-in multi-agent BabyAI levels: a factory per id that builds a ``BabyAITextEnv``
around one minigrid BabyAI level class, checking the level options users may set. Each is the
entry point of its id (``make("babyai/pickup")``); ``babyai.numeric`` wraps them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from minigrid.envs.babyai import BlockedUnlockPickup, GoToLocal, PutNextLocal, UnlockPickup
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel

from marlang.envs.babyai.text import BabyAITextEnv


@dataclass(frozen=True)
class BabyAILevelFactory:
    """Builds a ``BabyAITextEnv`` around one minigrid BabyAI level class.

    ``level_kwargs`` are fixed constructor arguments; ``options`` are the level constructor
    arguments users may override through ``make`` (with their defaults).
    """

    env_id: str
    level_class: type[RoomGridLevel]
    max_steps: int | None = None
    """Default step limit; ``None`` keeps the level's own."""
    level_kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def _check_options(self, arguments: Mapping[str, Any], given: Mapping[str, Any]) -> None:
        for name, value in given.items():
            if isinstance(self.options[name], bool):
                expected, valid = "True or False", type(value) is bool
            else:
                expected = "a positive integer"
                valid = type(value) is int and value >= 1
            if not valid:
                raise ValueError(f"{self.env_id}: {name} must be {expected}, got {value!r}")
        room_size = arguments.get("room_size")
        if room_size is not None and room_size < 5:
            raise ValueError(f"{self.env_id}: room_size must be >= 5, got {room_size}")
        for name in ("num_dists", "num_objs"):
            if name in arguments and room_size is not None:
                # Past ~40% of the floor, minigrid's rejection sampling slows to a crawl.
                least, most = (2 if name == "num_objs" else 1), (room_size - 2) ** 2 * 2 // 5
                if not least <= arguments[name] <= most:
                    raise ValueError(
                        f"{self.env_id}: {name} must be between {least} and {most} for "
                        f"room_size={room_size}, got {arguments[name]}"
                    )

    def __call__(
        self,
        n_agents: int = 2,
        *,
        max_steps: int | None = None,
        render_mode: str | None = None,
        **options: Any,
    ) -> BabyAITextEnv:
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            valid = ["n_agents", "max_steps", "render_mode", *self.options]
            raise ValueError(
                f"{self.env_id} has no parameter {unknown[0]!r}; "
                f"valid parameters: {', '.join(valid)}"
            )
        level_arguments = {**self.level_kwargs, **self.options, **options}
        self._check_options(level_arguments, options)
        try:
            level = self.level_class(**level_arguments)
        except (AssertionError, ValueError) as error:
            raise ValueError(f"{self.env_id}: invalid level options {options}: {error}") from error
        return BabyAITextEnv(
            level,
            n_agents=n_agents,
            max_steps=self.max_steps if max_steps is None else max_steps,
            render_mode=render_mode,
            env_id=self.env_id,
        )


BABYAI_LEVELS: Mapping[str, BabyAILevelFactory] = MappingProxyType({
    level.env_id: level
    for level in (
        BabyAILevelFactory("babyai/goto-obj", GoToLocal, options={"room_size": 8, "num_dists": 8}),
        BabyAILevelFactory("babyai/pickup", BlockedUnlockPickup),
        # minigrid 3.x loses this level's intended 8 * room_size**2 limit (it checks
        # `max is None`), which leaves 72 steps; restore the intended one.
        BabyAILevelFactory(
            "babyai/unlock-pickup", UnlockPickup, max_steps=8 * 6**2, options={"distractors": False}
        ),
        BabyAILevelFactory(
            "babyai/put-next", PutNextLocal, options={"room_size": 8, "num_objs": 8}
        ),
    )
})
"""The built-in BabyAI levels by env id (each one's spec: ``marlang.envs.builtin``)."""
