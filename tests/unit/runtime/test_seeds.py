"""Derived seeds (runtime/seeds.py: derive): each is the number its site passed on before."""

from __future__ import annotations

import pytest


def test_derived_seeds_are_the_numbers_each_site_passed_on_before():
    from interp_toolkit.runtime.seeds import derive

    for seed in (0, 3, 11):
        assert derive(seed, "training_scores") == seed + 7919
        assert derive(seed, "no_repeat_batch") == seed + 1
        assert [derive(seed, "untrained_model", i) for i in range(3)] == [
            seed + 7919 * (i + 1) for i in range(3)
        ]
        assert derive(seed, "study_task") == seed + 11
        assert derive(seed, "heldout_task") == seed + 1_000
        assert derive(seed, "heldout_resamples") == seed + 1
        assert derive(seed, "sample_prompt", 2) == seed + 2
        assert derive(seed, "probe_period", 5) == seed * 1000 + 5
        assert derive(seed, "shuffled_layer", 1) == seed * 7919 + 1
        assert derive(seed, "llc_chains") == seed + 32_452_843


def test_an_unknown_derived_seed_or_a_stray_index_is_refused():
    from interp_toolkit.runtime.seeds import derive

    with pytest.raises(ValueError, match="DERIVED"):
        derive(0, "nope")
    with pytest.raises(ValueError, match="takes no index"):
        derive(0, "study_task", 3)
