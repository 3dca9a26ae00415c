"""Tables of runs from their own files: ``report`` summarizes episodes into rows with intervals,
``cost`` counts what a run spent (calls, tokens, seconds, a price) and the score-against-cost front.
"""
