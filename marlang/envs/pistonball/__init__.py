"""PettingZoo Pistonball: the text env with its rule team and narration, and the numeric
view with a sparse team reward (``pistonball/n5-sparse``) for neural learners.
"""
