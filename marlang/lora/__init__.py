"""The LoRA core the weight-space methods (``marlang.methods.ppo``, ``marlang.methods.magrpo``)
share: the team of adapters (``team``), their files (``files``), LoRA options (``options``),
the trainer template (``template``), data-parallel sums (``distributed``) and playing a
trained team back (``playback``). Submodules load torch and PEFT on import."""
