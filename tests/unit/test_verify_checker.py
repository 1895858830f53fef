"""magnetar verify's checker (client/verify_checker.py) on hand-made
histories, one per kind of anomaly, and the histories it must accept."""

from __future__ import annotations

import pytest

from client.verify_checker import Kind, check


class History:
    """A history written the way the verifier records it, step by step."""

    def __init__(self, type: str = "Shared") -> None:
        self.events: list[dict] = []
        self._add(k="subscribe", sub="s", type=type)

    def _add(self, **e: object) -> History:
        self.events.append({"n": len(self.events), "t": float(len(self.events)), **e})
        return self

    def send(
        self, p: str, s: int, key: str = "k", at: tuple | None = (1, 0), err: str = ""
    ) -> History:
        self._add(k="send", p=p, s=s, key=key)
        if err:
            return self._add(k="sent", p=p, s=s, err=err)
        if at is None:  # no receipt at all
            return self
        return self._add(k="sent", p=p, s=s, id=[*at, -1])

    def recv(
        self, sub: str, p: str, s: int, at: tuple, key: str = "k", type: str = "Shared"
    ) -> History:
        self._add(k="recv", sub=sub, type=type, c="c0", p=p, s=s, key=key, id=[*at, -1])
        return self._add(k="ack", sub=sub, c="c0", id=[*at, -1])


def kinds(h: History) -> list[str]:
    return sorted(a.kind.value for a in check(h.events).anomalies)


def test_a_clean_history_passes_and_counts_what_happened():
    h = History().send("p", 0, at=(1, 0)).send("p", 1, at=(1, 1))
    h.recv("s", "p", 0, (1, 0)).recv("s", "p", 1, (1, 1)).recv("s", "p", 1, (1, 1))
    v = check(h.events)
    assert v.ok and v.to_json()["verdict"] == "PASS"
    assert v.counts["acknowledged"] == 2
    assert v.counts["subscriptions"]["s"] == {
        "type": "Shared",
        "delivered": 2,
        "deliveries": 3,
        "redelivered": 1,  # same position again: at-least-once, not an anomaly
    }


@pytest.mark.parametrize(
    ("why", "build", "expected"),
    [
        (
            "an acknowledged send never delivered",
            lambda h: h.send("p", 0, at=(1, 0)).send("p", 1, at=(1, 1)).recv("s", "p", 0, (1, 0)),
            ["LOST"],
        ),
        (
            "a send whose receipt was an error may be missing",
            lambda h: (
                h.send("p", 0, at=(1, 0)).send("p", 1, err="Timeout").recv("s", "p", 0, (1, 0))
            ),
            [],
        ),
        (
            "a send with no receipt may be missing",
            lambda h: h.send("p", 0, at=None),
            [],
        ),
        (
            "a send that failed may still be delivered, once",
            lambda h: h.send("p", 0, err="Timeout").recv("s", "p", 0, (1, 0)),
            [],
        ),
        (
            "a resend deduplication answered (-1:-1) must still be delivered",
            lambda h: h.send("p", 0, at=(-1, -1)),
            ["LOST"],
        ),
        (
            "one send stored at two positions",
            lambda h: h.send("p", 0, at=(1, 0)).recv("s", "p", 0, (1, 0)).recv("s", "p", 0, (2, 0)),
            ["DUPLICATE"],
        ),
        (
            "a message nobody sent",
            lambda h: h.send("p", 0).recv("s", "p", 0, (1, 0)).recv("s", "q", 9, (1, 1)),
            ["PHANTOM"],
        ),
        (
            "a producer's positions fall as its sequence rises",
            lambda h: (
                h.send("p", 0, at=(2, 0))
                .send("p", 1, at=(1, 5))
                .recv("s", "p", 0, (2, 0))
                .recv("s", "p", 1, (1, 5))
            ),
            ["ACK_ORDER"],
        ),
        (
            "two sends acknowledged at one position",
            lambda h: (
                h.send("p", 0, at=(1, 0))
                .send("p", 1, at=(1, 0))
                .recv("s", "p", 0, (1, 0))
                .recv("s", "p", 1, (1, 0))
            ),
            ["ACK_ORDER"],
        ),
    ],
)
def test_anomalies_of_delivery_and_acknowledgement(why, build, expected):
    assert kinds(build(History())) == expected, why


def _two(type: str, deliveries: tuple, keys: tuple[str, str]) -> History:
    """Two sends (keys ``keys``), then their deliveries in the order given."""
    h = History(type)
    h.send("p", 0, key=keys[0], at=(1, 0)).send("p", 1, key=keys[1], at=(1, 1))
    for p, s, at in deliveries:
        h.recv("s", p, s, at, key=keys[s], type=type)
    return h


IN_ORDER = (("p", 0, (1, 0)), ("p", 1, (1, 1)))
SWAPPED = (("p", 1, (1, 1)), ("p", 0, (1, 0)))


@pytest.mark.parametrize(
    ("type", "deliveries", "keys", "expected"),
    [
        ("Exclusive", IN_ORDER, ("k", "k"), []),
        ("Exclusive", SWAPPED, ("k", "k"), ["PRODUCER_ORDER"]),
        ("Failover", SWAPPED, ("a", "b"), ["PRODUCER_ORDER"]),  # keys do not matter
        ("Key_Shared", SWAPPED, ("k", "k"), ["KEY_ORDER"]),
        ("Key_Shared", SWAPPED, ("a", "b"), []),  # two keys: no order between them
        ("Shared", SWAPPED, ("k", "k"), []),  # Shared promises no order
    ],
)
def test_first_deliveries_keep_the_order_the_subscription_type_promises(
    type, deliveries, keys, expected
):
    assert kinds(_two(type, deliveries, keys)) == expected


def test_a_rewind_redelivers_a_stretch_without_breaking_order():
    h = History("Exclusive")
    for s in range(4):
        h.send("p", s, at=(1, s))
    for s in (0, 1, 2, 1, 2, 3):  # a reconnection resends 1 and 2
        h.recv("s", "p", s, (1, s), type="Exclusive")
    v = check(h.events)
    assert v.ok, v.anomalies
    assert v.counts["subscriptions"]["s"]["redelivered"] == 2


def test_each_subscription_is_checked_on_its_own():
    h = History().send("p", 0, at=(1, 0)).recv("s", "p", 0, (1, 0))
    h._add(k="recv", sub="b", type="Shared", c="c", p="x", s=1, key="", id=[1, 1, -1])
    got = check(h.events).anomalies
    assert sorted((a.kind.value, a.subscription) for a in got) == [
        (Kind.LOST.value, "b"),
        (Kind.PHANTOM.value, "b"),
    ]


def test_the_verdict_lists_a_bounded_number_of_examples_per_kind():
    h = History()
    for s in range(50):
        h.send("p", s, at=(1, s))
    v = check(h.events).to_json()
    assert v["verdict"] == "FAIL" and v["anomalies"] == {"LOST": 50}
    assert len(v["examples"]) == 20


def test_an_outage_counts_for_the_fault_it_mostly_overlaps():
    from client.verify_report import fault_outages, longest_gap

    acks = [0.0, 1.0, 2.0, 9.0, 10.0, 10.5, 18.0, 19.0]
    assert longest_gap(acks, 0, 19) == 7.5
    assert longest_gap(acks, 2.5, 10) == 7.0  # 2 -> 9: its middle (5.5) is inside
    faults = [
        {"t": 2.5, "end": 6.0, "label": "pause bookie-0"},
        {"t": 10.4, "end": 14.0, "label": "kill9 broker-1"},
    ]
    tl = {"ack_times": acks, "faults": faults, "end": 19.0}
    got = [(o["fault"], o["longest_ack_gap_s"]) for o in fault_outages(tl)]
    assert got == [("pause bookie-0", 7.0), ("kill9 broker-1", 7.5)]


def test_the_recorded_history_reads_back_in_order(tmp_path):
    from client.verify_workload import Recorder, read_history

    rec = Recorder(tmp_path / "h.jsonl.gz")
    rec.record("send", p="p", s=0, key="k")
    rec.record("fault", t=1.5, end=2.0, label="pause bookie-0")  # t given: the fault's start
    rec.close()
    got = list(read_history(tmp_path / "h.jsonl.gz"))
    assert [(e["n"], e["k"]) for e in got] == [(0, "send"), (1, "fault")]
    assert got[1]["t"] == 1.5 and rec.count == 2


def test_a_run_without_anomalies_is_inconclusive_when_its_faults_did_not_happen(tmp_path):
    from client.verify_report import timeline, write

    h = History().send("p", 0, at=(1, 0)).recv("s", "p", 0, (1, 0))
    h._add(k="fault", end=3.0, label="kill9 broker-0", error="broker-0 is backoff, not running")
    h._add(k="fault", end=9.0, label="pause bookie-1", recovered_s=None)
    got = write(tmp_path, check(h.events), timeline(h.events), {})
    assert got["verdict"] == "INCONCLUSIVE" and got["anomalies"] == {}
    assert [d.split(":")[0] for d in got["doubts"]] == [
        "kill9 broker-0 at 5.0 s",
        "pause bookie-1 at 6.0 s",
    ]
    assert "doubt: kill9 broker-0" in (tmp_path / "report.md").read_text()
    clean = History().send("p", 0, at=(1, 0)).recv("s", "p", 0, (1, 0))
    assert write(tmp_path, check(clean.events), timeline(clean.events), {})["verdict"] == "PASS"
