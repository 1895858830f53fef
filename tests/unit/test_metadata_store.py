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
