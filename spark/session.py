"""The SparkSession every report and test uses: ``local[*]`` unless a
``--master`` says otherwise, Python workers on this interpreter, and the
``magnetar`` data source registered.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (else the system
``python3``, which lacks our packages): set it to this interpreter unless
the caller chose one. On a real cluster the executors need the same
packages (``docs/reports.md``, "On a cluster"). Under ``spark-submit``
(which hands the driver a running JVM through ``PYSPARK_GATEWAY_PORT``)
the master is ``spark-submit``'s own unless one is given here.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def start(
    master: str | None = None, app_name: str = "magnetar", conf: dict[str, str] | None = None
) -> SparkSession:
    """A SparkSession (the active one if it exists) with the data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark.datasource import MagnetarDataSource

    builder = SparkSession.builder.appName(app_name)
    if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or DEFAULT_MASTER)
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.dataSource.register(MagnetarDataSource)
    return session
