import random

import pytest

from bookie.ensemble_placement import new_ensemble, replace_bookies
from bookie.ledger_metadata import LedgerMetadata, NotEnoughBookiesError


def test_a_new_ensemble_takes_distinct_writable_bookies():
    writable = ["b1", "b2", "b3", "b4"]
    for seed in range(20):
        ensemble = new_ensemble(writable, 3, random.Random(seed))
        assert len(set(ensemble)) == 3 and set(ensemble) <= set(writable)
    with pytest.raises(NotEnoughBookiesError, match="needs 3 writable bookies; 2 are available"):
        new_ensemble(["b1", "b2"], 3, random.Random(0))


def test_replacements_come_from_outside_the_ensemble_and_only_at_the_failed_indexes():
    ensemble = ["b1", "b2", "b3"]
    for seed in range(20):
        out = replace_bookies(ensemble, {2, 0}, ["b1", "b2", "b3", "b4", "b5"], random.Random(seed))
        assert out is not None
        assert out[1] == "b2" and {out[0], out[2]} == {"b4", "b5"}
    assert ensemble == ["b1", "b2", "b3"]  # the caller's list is left alone


def test_too_few_writable_bookies_outside_the_ensemble_replace_nothing():
    assert replace_bookies(["b1", "b2"], [0, 1], ["b1", "b2", "b3"], random.Random(0)) is None
    assert replace_bookies(["b1", "b2"], [0], ["b1", "b2"], random.Random(0)) is None
    assert replace_bookies(["b1", "b2"], [], ["b1", "b2"], random.Random(0)) == ["b1", "b2"]


def test_one_replacement_is_the_random_choice_among_the_candidates():
    """The writer used to pick its replacement with ``rng.choice``; the
    same seed still picks the same bookie."""
    candidates = ["b3", "b4", "b5", "b6"]
    for seed in range(20):
        out = replace_bookies(["b1", "b2"], [1], ["b1", *candidates], random.Random(seed))
        assert out == ["b1", random.Random(seed).choice(candidates)]


def test_a_new_segment_replaces_the_segments_from_its_first_entry_on():
    md = LedgerMetadata(1, 2, 2, 2, ensembles=[(0, ["a", "b"]), (10, ["a", "c"])])
    md.start_segment(20, ["d", "c"])
    assert md.ensembles == [(0, ["a", "b"]), (10, ["a", "c"]), (20, ["d", "c"])]
    md.start_segment(10, ["e", "c"])  # a segment that starts where one did gives way
    assert md.ensembles == [(0, ["a", "b"]), (10, ["e", "c"])]
    assert md.ensemble_for(9) == ["a", "b"] and md.ensemble_for(15) == ["e", "c"]
