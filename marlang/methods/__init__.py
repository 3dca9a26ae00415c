"""The learning methods, one folder each: ``reflexion``, ``langmarl``, ``ppo``, ``magrpo`` (and
GRPO) and ``neural`` (MAPPO, IPPO, QMIX, VDN through BenchMARL, with the LLM critics of
``learning.critic``). Each implements the seam in ``marlang.learners``; the weight-space ones
share the LoRA core in ``marlang.methods.lora``. ``marlang.registry.LEARNERS`` names them by entry
point, so nothing is imported until a run asks for it.
"""
