"""The metastore leader's session deadlines, as a table of steps: what the
leader does at a time, and which sessions an expiry pass ends."""

from metastore.session_deadlines import SessionDeadlines

TTLS = {1: 1000, 2: 3000}  # session id -> TTL ms


def _pass(d: SessionDeadlines, term: int, now: float, ttls: dict[int, int]) -> list[int] | None:
    """One expiry pass as the server runs it: None when it may not expire
    anything (a fresh term), else the sessions it ends."""
    if not d.start_pass(term, ttls, now):
        return None
    ended = [sid for sid, ttl in ttls.items() if d.expired(sid, ttl, now)]
    for sid in ended:
        d.closed(sid)
    d.forget_ended({sid for sid in ttls if sid not in ended})
    return ended


def test_the_first_pass_of_a_term_grants_fresh_ttls_and_expires_nothing():
    d = SessionDeadlines()
    d.kept_alive(1, 1000, now=0.0)  # kept alive long ago, in another term
    assert _pass(d, term=5, now=100.0, ttls=TTLS) is None
    assert d.time_left(100.0) == {1: 1.0, 2: 3.0}
    assert _pass(d, term=5, now=100.5, ttls=TTLS) == []
    assert _pass(d, term=5, now=101.5, ttls=TTLS) == [1]  # 1 s TTL passed
    assert _pass(d, term=5, now=103.5, ttls={2: 3000}) == [2]
    assert len(d) == 0


def test_keep_alives_move_deadlines_and_closed_sessions_are_forgotten():
    d = SessionDeadlines()
    assert _pass(d, term=1, now=0.0, ttls=TTLS) is None
    steps = [
        # (now, keep-alive of session, sessions the pass ends)
        (0.8, 1, []),
        (1.5, 1, []),  # 1 was kept alive at 0.8: deadline 1.8, then 2.5
        (2.4, None, []),
        (2.6, None, [1]),
        (3.1, None, [2]),  # 2 never kept alive: deadline 0 + 3 s
    ]
    live = dict(TTLS)
    for now, keep_alive, ends in steps:
        if keep_alive is not None:
            d.kept_alive(keep_alive, live[keep_alive], now)
        assert _pass(d, term=1, now=now, ttls=live) == ends, now
        for sid in ends:
            del live[sid]


def test_leading_again_after_following_starts_a_fresh_term_of_deadlines():
    d = SessionDeadlines()
    assert _pass(d, term=1, now=0.0, ttls=TTLS) is None
    d.not_leading()
    # Same term number as before, but this node followed meanwhile: its
    # deadlines are stale, so the next pass grants fresh TTLs again.
    assert _pass(d, term=1, now=50.0, ttls=TTLS) is None
    assert _pass(d, term=1, now=50.5, ttls=TTLS) == []


def test_a_session_unseen_by_this_leader_gets_a_deadline_at_its_first_check():
    d = SessionDeadlines()
    assert _pass(d, term=2, now=0.0, ttls={}) is None
    assert _pass(d, term=2, now=10.0, ttls={7: 1000}) == []  # created via another node
    assert d.time_left(10.0) == {7: 1.0}
    assert _pass(d, term=2, now=11.5, ttls={7: 1000}) == [7]


def test_deadlines_of_ended_sessions_are_dropped():
    d = SessionDeadlines()
    d.kept_alive(1, 1000, 0.0)
    d.kept_alive(2, 1000, 0.0)
    d.forget_ended({2})
    assert d.time_left(0.0) == {2: 1.0}
    d.closed(2)
    d.closed(3)  # unknown: nothing to do
    assert len(d) == 0
