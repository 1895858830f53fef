"""The floor under TLS's cost: one bare gRPC hop between two Python
processes, plaintext against TLS, with the batch shape Magnetar's hot path
uses (no Magnetar code at all). Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.tls_floor [--pairs 5] [--mb 200]

A client streams ``--mb`` MB as messages of ``--batch`` 1 KiB records
(a producer batch, an add request) on one bidi stream to a sink process
that answers each with a few bytes (a receipt). Runs alternate plaintext /
TLS ``--pairs`` times (a throwaway CA and certificate made here, ECDSA
P-256, TLS 1.3 with gRPC's defaults); the medians of MB/s and of the CPU
both processes spend per 1 KiB record are printed with the TLS/plaintext
ratios. Whatever Magnetar adds, each TLS hop a message takes costs at
least the difference in CPU per record measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import grpc.aio
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from broker.secure_setup import make_ca, make_certificate, pem
from protos.serving import free_port

METHOD = "/floor.Sink/Push"
RECORD = 1024


def _ident(b: bytes) -> bytes:
    return b


async def serve(port: int, cert: str, key: str) -> None:
    async def push(request_iterator, context):  # type: ignore[no-untyped-def]
        async for request in request_iterator:
            yield len(request).to_bytes(8, "big")

    server = grpc.aio.server(
        options=[("grpc.max_receive_message_length", 64 << 20)],
    )
    handler = grpc.stream_stream_rpc_method_handler(
        push, request_deserializer=_ident, response_serializer=_ident
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("floor.Sink", {"Push": handler}),)
    )
    if cert:
        creds = grpc.ssl_server_credentials([(Path(key).read_bytes(), Path(cert).read_bytes())])
        server.add_secure_port(f"127.0.0.1:{port}", creds)
    else:
        server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def push(target: str, ca: str | None, total_bytes: int, batch: int) -> dict:
    options = [("grpc.max_send_message_length", 64 << 20)]
    if ca:
        creds = grpc.ssl_channel_credentials(root_certificates=Path(ca).read_bytes())
        channel = grpc.aio.secure_channel(target, creds, options=options)
    else:
        channel = grpc.aio.insecure_channel(target, options=options)
    call = channel.stream_stream(METHOD, request_serializer=_ident, response_deserializer=_ident)()
    message = b"x" * (RECORD * batch)
    n = max(1, total_bytes // len(message))
    await call.write(message)
    await call.read()  # connected and warmed
    cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    window = 4  # messages in flight, as the ledger writer's
    sent = received = 0
    while received < n:
        while sent < n and sent - received < window:
            await call.write(message)
            sent += 1
        await call.read()
        received += 1
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    await call.done_writing()
    await channel.close()
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"records": n * batch, "wall_s": wall, "client_cpu_s": cpu}


def _pki(d: Path) -> tuple[str, str, str]:
    from cryptography.hazmat.primitives import serialization

    ca_key, ca = make_ca("floor CA")
    key, cert = make_certificate(ca_key, ca, "localhost", ["localhost"], ["127.0.0.1"])
    (d / "ca.pem").write_bytes(pem(ca))
    (d / "cert.pem").write_bytes(pem(cert))
    (d / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(d / "ca.pem"), str(d / "cert.pem"), str(d / "key.pem")


def _run(tls: bool, pki: tuple[str, str, str], total: int, batch: int) -> dict:
    ca, cert, key = pki
    port = free_port()
    args = [str(port), cert if tls else "", key if tls else ""]
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.tls_floor", "--serve", *args])
    try:
        sink = psutil.Process(proc.pid)
        deadline = time.monotonic() + 30
        while True:  # wait until it listens (bounded)
            if any(c.laddr.port == port for c in sink.net_connections()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the sink did not start")
            time.sleep(0.05)  # polling the sink's listening socket
        before = sink.cpu_times()
        result = asyncio.run(push(f"127.0.0.1:{port}", ca if tls else None, total, batch))
        after = sink.cpu_times()
    finally:
        proc.terminate()
        proc.wait(10)
    sink_cpu = (after.user - before.user) + (after.system - before.system)
    records = result["records"]
    return {
        "tls": tls,
        "mb_s": round(records * RECORD / result["wall_s"] / 1e6, 1),
        "client_cpu_us_per_record": round(result["client_cpu_s"] / records * 1e6, 3),
        "sink_cpu_us_per_record": round(sink_cpu / records * 1e6, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--batch", type=int, default=128, help="1 KiB records per message")
    ap.add_argument("--serve", nargs=3, metavar=("PORT", "CERT", "KEY"), help="internal")
    a = ap.parse_args()
    if a.serve:
        asyncio.run(serve(int(a.serve[0]), a.serve[1], a.serve[2]))
        return
    rows: dict[bool, list[dict]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        pki = _pki(Path(tmp))
        for _ in range(a.pairs):
            for tls in (False, True):
                row = _run(tls, pki, a.mb * 1_000_000, a.batch)
                rows[tls].append(row)
                print(json.dumps(row), flush=True)
    summary = {}
    for tls, name in ((False, "plain"), (True, "tls")):
        for key in ("mb_s", "client_cpu_us_per_record", "sink_cpu_us_per_record"):
            summary[f"{name}_{key}"] = statistics.median(r[key] for r in rows[tls])
    for key in ("mb_s", "client_cpu_us_per_record", "sink_cpu_us_per_record"):
        summary[f"ratio_{key}"] = round(summary[f"tls_{key}"] / summary[f"plain_{key}"], 3)
    print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
