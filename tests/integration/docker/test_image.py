"""The image (deploy/Dockerfile) on a real engine: who it runs as, what it
declares, and a standalone in one container serving produce/consume to the
host through a published port, stopping on SIGTERM as PID 1 and keeping its
data across a restart."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from testcontainers.core.container import DockerContainer

from client import Client, InitialPosition
from protos.serving import free_port
from tests.harness import wait_for
from tests.integration.docker.engine import health, inspect, run


def test_image_runs_unprivileged_with_both_commands(docker_images: str) -> None:
    config = inspect(docker_images)["Config"]
    assert config["User"] == "magnetar"
    assert "/data" in config["Volumes"]
    assert config["Healthcheck"]["Test"][0] == "CMD-SHELL"
    assert "magnetar health" in config["Healthcheck"]["Test"][1]
    uid = run("docker", "run", "--rm", "--entrypoint", "id", docker_images, "-u").strip()
    assert uid != "0"
    admin = run("docker", "run", "--rm", "--entrypoint", "magnetar-admin", docker_images, "--help")
    assert "topics" in admin
    server = run("docker", "run", "--rm", docker_images, "--help")
    for command in ("standalone", "metastore", "bookie", "broker", "health"):
        assert command in server


@pytest.fixture
def standalone(docker_images: str) -> Iterator[tuple[DockerContainer, str]]:
    """A standalone in one container; its broker listens on a free port that
    is published on 127.0.0.1 under the same number and advertised as
    127.0.0.1, so lookups answered to the host point at the published port."""
    port = free_port()
    container = (
        DockerContainer(docker_images)
        .with_command(f"standalone --data-dir /data --broker-port {port}")
        .with_env("MAGNETAR_BROKER_ADVERTISED_ADDRESS", "127.0.0.1")
        .with_env("MAGNETAR_HEALTHCHECK_ADDRESS", f"127.0.0.1:{port}")
    )
    # Published on 127.0.0.1 only (with_bind_ports publishes on every address).
    container.ports[f"{port}/tcp"] = ("127.0.0.1", port)  # type: ignore[assignment]
    container.start()
    try:
        yield container, f"magnetar://127.0.0.1:{port}"
    finally:
        container.stop()


def test_standalone_container_serves_the_host_and_keeps_data(
    standalone: tuple[DockerContainer, str],
) -> None:
    container, url = standalone
    name = container.get_wrapped_container().id
    wait_for(lambda: health(name) == "healthy", 120, "the container's HEALTHCHECK to pass", 0.2)
    topic = "persistent://public/default/image-test"
    with Client(url, operation_timeout_seconds=30) as client:
        consumer = client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        producer = client.create_producer(topic)
        sent = [f"m{i}".encode() for i in range(200)]
        for data in sent:
            producer.send(data)
        first = [consumer.receive(timeout_millis=10000) for _ in range(100)]
        for msg in first:
            consumer.acknowledge(msg)
        assert [m.data() for m in first] == sent[:100]
        consumer.close()

    # SIGTERM to PID 1 (the supervisor): a clean, prompt exit.
    started = time.monotonic()
    run("docker", "stop", "--time", "20", name, timeout_s=60)
    stopped_s = time.monotonic() - started
    state = inspect(name)["State"]
    assert state["ExitCode"] == 0, state
    assert stopped_s < 15, f"docker stop took {stopped_s:.1f} s"

    run("docker", "start", name)
    wait_for(lambda: health(name) == "healthy", 120, "the restarted container to be healthy", 0.2)
    with Client(url, operation_timeout_seconds=30) as client:
        consumer = client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        rest = [consumer.receive(timeout_millis=10000).data() for _ in range(100)]
    assert rest == sent[100:]
