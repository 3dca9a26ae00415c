"""Statistics and figures with no knowledge of runs: ``intervals`` (95% intervals inside each
quantity's range), ``plots`` (matplotlib figures), ``scalars`` (TensorBoard event files).
"""
