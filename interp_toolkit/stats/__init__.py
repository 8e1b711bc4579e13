"""Statistics shared by every test: intervals, null distributions, p-values, the thresholds."""
