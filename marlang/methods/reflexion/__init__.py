"""Reflexion (``learning.method: reflexion``): each agent writes a reflection on its episodes
into its memory; the learner is in ``learner``."""
