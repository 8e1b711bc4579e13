"""The registry of measures: a new measure is one entry, and the study's tables and study.json
read it without another edit."""

from __future__ import annotations

import pytest
from findings_helpers import depth

from interp_toolkit.measures import registry
from interp_toolkit.measures.registry import MEASURE, Measure, register_measure
from interp_toolkit.measures.seeds import SeedMeasurements, over_seeds
from interp_toolkit.reports.seeds import seeds_section
from interp_toolkit.reports.study_report import depth_section


@pytest.fixture
def extra():
    m = register_measure(
        Measure("heads_plus_one", "induction heads plus one", lambda d: len(d.induction_heads) + 1)
    )
    yield m
    registry.MEASURES.remove(m)
    del MEASURE[m.name]


def test_one_entry_reaches_the_study_table_the_seeds_table_and_study_json(extra):
    one, two = depth(1), depth(2)
    seeds = [SeedMeasurements(s, [one, two]) for s in (0, 1)]
    (setting,) = over_seeds([("cpu", ["cpu-1l", "cpu-2l"])], seeds)
    assert setting.runs[1].to_dict()["heads_plus_one"]["median"] == 3.0
    assert "induction heads plus one" in str(seeds_section(setting).items)
    assert "induction heads plus one" in str(depth_section([one, two], curves={}).items)


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="registered already"):
        register_measure(Measure("val_loss", "again", lambda d: 0.0))


def test_held_and_tally_measures_go_over_seeds_as_counts():
    one, two = depth(1), depth(2)
    seeds = [SeedMeasurements(s, [one, two]) for s in (0, 1, 2)]
    (setting,) = over_seeds([("cpu", ["cpu-1l", "cpu-2l"])], seeds)
    two_over = setting.runs[1].to_dict()
    assert two_over["induction_role"] == {"held": 3, "of": 3, "seeds": [0, 1, 2]}
    assert two_over["routes"] == {"K-composition": 3}
    assert setting.runs[0].to_dict()["induction_formed"]["held"] == 0
