import pickle

import pytest

from metastore.store import MetadataStore, validate_key
from protos import common_pb2

OK, BAD_VERSION, SESSION_EXPIRED = common_pb2.OK, common_pb2.BAD_VERSION, common_pb2.SESSION_EXPIRED


def test_versions_and_conditional_puts():
    s = MetadataStore()
    assert s.put("/a", b"1", -1, 0)[:3] == (OK, "", 0)
    code, msg, found, _ = s.put("/a", b"2", -1, 0)
    assert code == BAD_VERSION and "expected version -1, found 0" in msg and found == 0
    assert s.put("/a", b"2", 0, 0)[:3] == (OK, "", 1)
    assert s.put("/a", b"3", 0, 0)[0] == BAD_VERSION
    assert s.put("/a", b"3", None, 0)[2] == 2
    record, revision = s.get("/a")
    assert record is not None and record.value == b"3" and record.version == 2
    assert revision == 3 and record.create_revision == 1 and record.mod_revision == 3


def test_conditional_delete():
    s = MetadataStore()
    s.put("/k", b"v", None, 0)
    assert s.delete("/k", 5)[0] == BAD_VERSION
    assert s.get("/k")[0] is not None
    assert s.delete("/k", 0)[:3] == (OK, "", 1)
    assert s.get("/k")[0] is None
    assert s.delete("/k", None)[:3] == (OK, "", 0)


def test_children_lists_direct_children_in_order():
    s = MetadataStore()
    for key in ["/x/b/1", "/x/a", "/x/b/2", "/x/c/d/e", "/xy", "/y/z"]:
        s.put(key, b"", None, 0)
    assert s.children("/x") == ["a", "b", "c"]
    assert s.children("/x/b") == ["1", "2"]
    assert s.children("/") == ["x", "xy", "y"]
    assert s.children("/nothing") == []


def test_increment_is_a_counter():
    s = MetadataStore()
    assert s.increment("/c", 1)[2] == 1
    assert s.increment("/c", 5)[2] == 6
    s.put("/text", b"abc", None, 0)
    assert s.increment("/text", 1)[0] == common_pb2.INVALID_ARGUMENT


def test_ephemeral_keys_die_with_their_session():
    s = MetadataStore()
    sid = s.create_session(5000)[2]
    other = s.create_session(5000)[2]
    s.put("/eph/a", b"", None, sid)
    s.put("/eph/b", b"", None, sid)
    s.put("/eph/c", b"", None, other)
    s.put("/persistent", b"", None, 0)
    assert s.put("/eph/x", b"", None, 999)[0] == SESSION_EXPIRED
    s.end_session(sid)
    assert s.children("/eph") == ["c"]
    assert s.get("/persistent")[0] is not None
    assert sid not in s.sessions


def test_taking_over_an_ephemeral_key_rebinds_it():
    s = MetadataStore()
    old = s.create_session(5000)[2]
    new = s.create_session(5000)[2]
    s.put("/bookies/available/b1", b"old", None, old)
    s.put("/bookies/available/b1", b"new", None, new)
    s.end_session(old)
    record = s.get("/bookies/available/b1")[0]
    assert record is not None and record.value == b"new" and record.session_id == new


def test_session_limit():
    s = MetadataStore(max_sessions=2)
    s.create_session(1000)
    s.create_session(1000)
    code, msg, _, _ = s.create_session(1000)
    assert code == common_pb2.TOO_MANY_REQUESTS and "max_sessions = 2" in msg


def test_state_survives_pickling_as_raft_snapshots_do():
    s = MetadataStore()
    sid = s.create_session(1000)[2]
    s.put("/a/b", b"v", None, sid)
    back = pickle.loads(pickle.dumps(s))
    assert back.get("/a/b")[0] == s.get("/a/b")[0]
    assert back.sessions[sid].keys == {"/a/b"}
    back.put("/c", b"", None, 0)  # the lock was recreated


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "empty"),
        ("a/b", "not absolute"),
        ("/", "root"),
        ("/a//b", "empty segment"),
        ("/a/../b", "'..'"),
        ("/a/./b", "'.'"),
        ("/a/", "empty segment"),
    ],
)
def test_key_validation(key, problem):
    found = validate_key(key)
    assert found is not None and problem in found


def test_valid_keys():
    assert validate_key("/managed-ledgers/public/default/persistent/t") is None


def test_every_revision_is_one_event_and_watchers_resume_or_hear_compacted():
    from metastore.store import DELETE, PUT, CompactedError

    s = MetadataStore(max_history=5)
    sid = s.create_session(5000)[2]
    s.put("/w/a", b"1", None, 0)  # rev 1
    s.put("/w/b", b"2", None, sid)  # rev 2
    s.increment("/c", 1)  # rev 3
    s.delete("/w/a", None)  # rev 4
    s.delete("/w/missing", None)  # no change, no event
    s.end_session(sid)  # rev 5: /w/b deleted
    events, nxt = s.events_since(1, "/w/", 100)
    assert [(e.revision, e.type, e.key) for e in events] == [
        (1, PUT, "/w/a"),
        (2, PUT, "/w/b"),
        (4, DELETE, "/w/a"),
        (5, DELETE, "/w/b"),
    ]
    assert nxt == 6 and s.revision == 5
    assert s.events_since(6, "/", 100) == ([], 6)
    events, nxt = s.events_since(2, "/", 2)  # a limit stops early, resumable
    assert [e.revision for e in events] == [2, 3] and nxt == 4
    s.put("/w/z", b"", None, 0)  # rev 6: rev 1 falls out of the 5 kept
    with pytest.raises(CompactedError):
        s.events_since(1, "/", 100)
    assert [e.revision for e in s.events_since(2, "/", 100)[0]] == [2, 3, 4, 5, 6]


def test_txn_is_all_or_nothing():
    from metastore.store import CMP_VALUE, CMP_VERSION, OP_DELETE, OP_PUT

    s = MetadataStore()
    s.put("/t/a", b"1", None, 0)
    rev = s.revision
    code, msg, ok, r = s.txn([("/t/a", CMP_VERSION, 1, b"")], [(OP_PUT, "/t/b", b"x", 0)])
    assert code == OK and not ok and "version is 0, not 1" in msg and r == rev
    assert s.get("/t/b")[0] is None
    code, _, ok, _ = s.txn([], [(OP_PUT, "/t/b", b"x", 0), (OP_PUT, "/t/c", b"", 99)])
    assert code == SESSION_EXPIRED and not ok and s.get("/t/b")[0] is None and s.revision == rev
    code, _, ok, r = s.txn(
        [("/t/a", CMP_VALUE, 0, b"1"), ("/t/new", CMP_VERSION, -1, b"")],
        [(OP_DELETE, "/t/a", b"", 0), (OP_PUT, "/t/new", b"n", 0)],
    )
    assert code == OK and ok and r == rev + 2
    assert s.get("/t/a")[0] is None and s.get("/t/new")[0].value == b"n"  # type: ignore[union-attr]


def test_a_retried_request_id_returns_the_first_result_and_applies_once():
    s = MetadataStore(dedup_window=2)
    first = s.apply(b"r1", "increment", "/n", 1)
    assert s.apply(b"r1", "increment", "/n", 1) == first
    assert s.get("/n")[0].value == b"1"  # type: ignore[union-attr]
    s.apply(b"r2", "increment", "/n", 1)
    s.apply(b"r3", "increment", "/n", 1)  # r1 leaves the window of 2
    assert s.apply(b"r1", "increment", "/n", 1)[2] == 4
    assert s.apply(b"", "increment", "/n", 1)[2] == 5  # no id: no dedup
    assert s.apply(b"", "increment", "/n", 1)[2] == 6


def test_list_prefix_in_key_order_with_a_limit():
    s = MetadataStore()
    for key in ["/l/b", "/l/a", "/l/c/d", "/lx", "/m"]:
        s.put(key, key.encode(), None, 0)
    rows, rev, more = s.list_prefix("/l/", 10)
    assert [k for k, _ in rows] == ["/l/a", "/l/b", "/l/c/d"] and not more and rev == 5
    rows, _, more = s.list_prefix("/l", 2)
    assert [k for k, _ in rows] == ["/l/a", "/l/b"] and more


def test_snapshot_keeps_history_and_dedup():
    s = MetadataStore(max_history=10)
    s.apply(b"r", "put", "/p", b"v", None, 0)
    restored = pickle.loads(pickle.dumps(s))
    assert restored.apply(b"r", "put", "/p", b"v", None, 0) == s.dedup[b"r"]
    assert restored.revision == 1
    assert [e.key for e in restored.events_since(1, "/", 10)[0]] == ["/p"]
