"""Cooperative coding and reasoning envs (``code/*``, ``math/math``, ``qa/hotpotqa``): the
turn-based env, its feedback and narration, the env factories by id, and the task data with
its answer checkers (``data``).
"""
