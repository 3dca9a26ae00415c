"""The LoRA core the weight-space methods (``marlang.methods.ppo``, ``marlang.methods.magrpo``)
share: the team of adapters (``team``), their files (``files``), LoRA options (``options``),
what a LoRA update's backward recomputes instead of keeping (``recompute``), the trainer a
method holds and calls (``trainer``), data-parallel sums (``distributed``) and playing a
trained team back (``playback``). The names a method builds on are exported here;
importing them loads torch and PEFT."""

from marlang.methods.lora.distributed import clip_gradients, launched_rank, launched_world_size
from marlang.methods.lora.options import AdapterOptions
from marlang.methods.lora.team import CENTRAL, TeamAdapters, ValueHeadOptions
from marlang.methods.lora.trainer import INITIAL_STATE, SEED_OFFSET, LoraTrainer

__all__ = [
    "CENTRAL",
    "INITIAL_STATE",
    "SEED_OFFSET",
    "AdapterOptions",
    "LoraTrainer",
    "TeamAdapters",
    "ValueHeadOptions",
    "clip_gradients",
    "launched_rank",
    "launched_world_size",
]
