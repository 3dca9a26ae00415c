"""What every marlang env shares: the base class (``MultiAgentEnv``, and ``NumericTextEnv``
for envs with numeric views too), the text spaces, and narration (each env's ``Narrator`` and
the dispatch that fits an episode's story into a token budget).
"""
