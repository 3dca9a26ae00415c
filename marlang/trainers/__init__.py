"""Weight-space training: neural MARL learners (``marlang.trainers.neural``) and, next to them,
trainers of language-model policies. Subpackages load their heavy dependencies on first use.
"""
