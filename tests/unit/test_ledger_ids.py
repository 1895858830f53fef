import pytest

from bookie.ledger_ids import block_of, usable


@pytest.mark.parametrize(
    ("counter", "size", "block"),
    [
        (1, 1, (1, 1)),  # one id per increment: the counter's value
        (64, 64, (1, 64)),  # the first block
        (128, 64, (65, 128)),
        (200, 8, (193, 200)),
    ],
)
def test_an_increment_by_the_block_size_reserves_the_ids_up_to_its_answer(counter, size, block):
    assert block_of(counter, size) == block


@pytest.mark.parametrize(
    ("next_id", "last_id", "after", "ok"),
    [
        (1, 0, -1, False),  # nothing reserved yet
        (5, 64, -1, True),  # a ledger that follows nothing
        (5, 64, 4, True),  # above the topic's last ledger
        (5, 64, 5, False),  # not above it: the block is dropped
        (5, 64, 100, False),  # another broker's later block made the last one
        (65, 64, -1, False),  # used up
        (64, 64, 63, True),  # the last id of the block
    ],
)
def test_a_block_serves_a_ledger_only_with_an_id_above_the_one_it_follows(
    next_id, last_id, after, ok
):
    assert usable(next_id, last_id, after) is ok
