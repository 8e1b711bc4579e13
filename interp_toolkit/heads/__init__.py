"""Heads: the score registry, the repeat probe, the scorer, the specificity test, untrained nulls, discovery, the induction heads."""
