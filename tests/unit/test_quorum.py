import pytest

from bookie.quorum import AckTracker, QuorumConfigError, check_quorums, write_set


@pytest.mark.parametrize(
    ("entry", "e", "qw", "expected"),
    [
        (0, 4, 3, [0, 1, 2]),
        (1, 4, 3, [1, 2, 3]),
        (2, 4, 3, [2, 3, 0]),
        (3, 4, 3, [3, 0, 1]),
        (5, 3, 3, [2, 0, 1]),
        (9, 1, 1, [0]),
    ],
)
def test_write_sets_stripe_over_the_ensemble(entry, e, qw, expected):
    assert write_set(entry, e, qw) == expected


@pytest.mark.parametrize(("e", "qw", "qa"), [(2, 3, 2), (3, 2, 3), (1, 1, 0), (0, 0, 0)])
def test_quorum_sizes_must_nest(e, qw, qa):
    with pytest.raises(QuorumConfigError):
        check_quorums(e, qw, qa)


def test_entries_confirm_in_order_once_qa_acked():
    t = AckTracker(ack_quorum=2)
    assert t.ack(1, 0) == []
    assert t.ack(1, 1) == []  # entry 0 is not confirmed yet
    assert t.ack(0, 2) == []
    assert t.ack(0, 0) == [0, 1]
    assert t.ack(0, 1) == []  # late duplicate
    assert t.ack(2, 1) == []
    assert t.ack(2, 1) == []  # the same bookie twice is one ack
    assert t.ack(2, 2) == [2]
