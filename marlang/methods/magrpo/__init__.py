"""MAGRPO and GRPO (``learning.method: magrpo`` / ``grpo``): group-relative policy optimization
of one LoRA adapter per agent. ``learner`` holds the learners (on the LoRA trainer of
``marlang.methods.lora.trainer``), ``options`` their keys, ``tree`` the trees of joint completions,
``grpo_loss`` the losses, ``rollout_server`` rollouts on a server that serves the adapters."""
