"""One process per data directory (protos/data_dir_lock.py) and taken
ports refused in one line (protos/serving.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from protos.data_dir_lock import LOCK_FILE, DataDirLock, DataDirLocked, holder_of
from protos.serving import PortInUse, check_port_free
from tests.harness import ROOT, wait_for

HOLD = (
    "import sys, time; from pathlib import Path; from protos.data_dir_lock import DataDirLock; "
    "DataDirLock(Path(sys.argv[1]), 'bookie'); print('held', flush=True); time.sleep(600)"
)


def test_a_second_lock_is_refused_naming_the_holder_and_free_again_after_release(tmp_path):
    first = DataDirLock(tmp_path / "d", "metastore")
    assert holder_of(tmp_path / "d") == f"pid {os.getpid()} (metastore)"
    with pytest.raises(DataDirLocked, match=rf"in use by pid {os.getpid()} \(metastore\)"):
        DataDirLock(tmp_path / "d", "metastore")
    first.release()
    assert holder_of(tmp_path / "d") is None
    DataDirLock(tmp_path / "d", "bookie").release()


def test_the_lock_goes_with_a_process_killed_by_sigkill(tmp_path: Path):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(DataDirLocked, match=f"pid {proc.pid} \\(bookie\\)"):
            DataDirLock(tmp_path, "bookie")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert (tmp_path / LOCK_FILE).exists()  # a stale file, but no stale lock
    wait_for(lambda: holder_of(tmp_path) is None, 5, "the lock to be free")
    DataDirLock(tmp_path, "bookie").release()


def test_no_lock_file_means_no_holder(tmp_path):
    assert holder_of(tmp_path) is None


def test_a_taken_port_is_refused_with_its_number_and_purpose():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(PortInUse, match=f"^port {port} \\(raft\\) is in use on 127.0.0.1$"):
            check_port_free("127.0.0.1", port, "raft")
    check_port_free("127.0.0.1", port, "raft")  # free again
    check_port_free("127.0.0.1", 0, "gRPC")  # picked later
    check_port_free("127.0.0.1", -1, "metrics")  # off
