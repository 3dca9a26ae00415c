"""LoRA PPO (``learning.method: ppo``): GLAM-style PPO on the action policy, one adapter per
agent that learns. ``learner`` holds the options, the loss and the learner (on the template in
``marlang.methods.lora.template``), ``samples`` the decision samples and GAE."""
