"""Multi-agent BabyAI: the text env and its levels, the text view, narration, the scripted
team, reward shaping, and the numeric view for neural learners (``babyai-marl/*`` ids).
"""
