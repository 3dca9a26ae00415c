"""Evaluation across runs: ``compare`` runs a config grid into one table, ``crossplay`` pairs
trained players with each other, ``creditcheck`` grades the credit critics against an oracle.
They drive whole runs (marlang.run), so they sit above it.
"""
