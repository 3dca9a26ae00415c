"""LoRA PPO (``learning.method: ppo``): GLAM-style PPO on the action policy, one adapter per
agent that learns. ``learner`` holds the update (on the LoRA trainer of
``marlang.methods.lora.trainer``), ``options`` its keys, ``loss`` the losses, ``samples`` the
decision samples and GAE."""
