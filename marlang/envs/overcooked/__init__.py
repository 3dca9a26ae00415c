"""Overcooked-AI for language-model cooks: the text env, its subgoal actions, the text view,
narration and the scripted team (the ``overcooked_ai`` package is imported on first use).
"""
