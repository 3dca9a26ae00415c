"""The credit-assignment benchmarks: the climbing game, level-based foraging, robotic
warehouse, and the two-agent worlds of the LCA and LLM-MCA papers (two-switch, victim-rubble,
spaceworld), each a ``NumericTextEnv`` for neural learners and LLM agents alike.
"""
