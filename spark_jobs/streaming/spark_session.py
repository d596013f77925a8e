"""The SparkSession every Tideline job and test uses, configured for small stateful streaming."""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from spark_jobs.settings import Settings
from spark_jobs.streaming.class_archive import driver_options
from spark_jobs.streaming.settings import event_log_dir

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
MIN_BATCHES_TO_RETAIN = "spark.sql.streaming.minBatchesToRetain"
CHANGELOG_CHECKPOINTING = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
ROCKSDB_PROVIDER = (
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
)

# The JVM's JIT stops at its first tier (C1). On two cores the optimising compiler (C2) competed
# with the work: it kept compiling Spark's code and each micro-batch's new generated classes at
# 20-50 % of a core, in steady state too. C1 alone cut a job's start-up CPU by a third and sped
# the experiment pipeline and fraud_rules up by a tenth or more (BENCHMARKS.md, "the JIT at its
# first tier"). With cores to spare, options of one's own (spark.conf
# spark.driver.extraJavaOptions / spark.executor.extraJavaOptions, even "") replace these.
# At the first tier alone the JVM reserves only 48 MB for compiled code (the tiered default is
# 240 MB): one query's code settles at ~40 MB, and several queries in one JVM (the demo, the
# pipeline, a test session) filled it, after which the JIT stops until its sweeper has thrown
# compiled methods out, and new code runs interpreted meanwhile (BENCHMARKS.md, thirteenth
# session: a test subset 9 % faster with the room).
JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"

BASE_CONF: dict[str, str] = {
    # The checkpoint fixes the shuffle width; with Spark's 200 every stateful micro-batch
    # runs 200 tasks, each opening its state store, whatever the batch's size.
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    # Each state commit uploads only the batch's changes; snapshots move to the store's
    # maintenance thread. A commit 0.3-0.4 s -> 5-12 ms, 18-35 % more micro-batches in the
    # same minutes, the pipeline's share of freshness 4.69 -> 4.00 s (BENCHMARKS.md,
    # sixteenth and seventeenth sessions). Spark reads a checkpoint of either kind, so a
    # query switches in place.
    CHANGELOG_CHECKPOINTING: "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # pandas UDFs see nullable integers as Int64, not float64 (which rounds large values);
    # the bucketed processors' input (streaming/bucketed/frames.py)
    "spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype": "true",
    "spark.driver.memory": "2g",
    "spark.sql.streaming.noDataMicroBatches.enabled": "true",
    "spark.python.worker.reuse": "true",
    # workers forked with their imports done and frozen (streaming/worker_daemon.py)
    "spark.python.daemon.module": "spark_jobs.streaming.worker_daemon",
    "spark.driver.extraJavaOptions": JIT_OPTIONS,
    "spark.executor.extraJavaOptions": JIT_OPTIONS,
}

# Checkpoints on the local file system: Spark's default (FileContext) checkpoint file manager
# creates every offset and commit file, and its .crc, with an explicit permission, which
# Hadoop without its native library applies by forking `chmod`, most of the time of the two
# log writes of every micro-batch. The FileSystem-based manager writes and renames plain
# files (atomic on a local file system), several times faster (BENCHMARKS.md, "a shorter
# micro-batch cycle"). (The raw local file system would be a little faster still, but RocksDB
# state stores need the checksummed LocalFileSystem.) Object stores keep Spark's defaults.
LOCAL_CHECKPOINT_CONF: dict[str, str] = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager",
}


def quiet_py4j() -> None:
    """Keep py4j's INFO lines out of the logs unless someone configured its logger.

    py4j logs every call from the JVM into Python (each foreachBatch, each listener event) at
    INFO, and again from its connections' finalizers at interpreter exit, after the stream a
    handler writes to may be closed (pytest's capture, bound to the root logger by Airflow's
    logging setup): "--- Logging error ---" then follows the run. Its warnings still pass.
    """
    py4j = logging.getLogger("py4j")
    if py4j.level == logging.NOTSET:
        py4j.setLevel(logging.WARNING)


def is_local_path(location: str) -> bool:
    """A plain path or a file: URI (not an object store or HDFS)."""
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", location)
    return scheme is None or scheme.group(1).lower() == "file"


def tools_conf(settings: Settings) -> dict[str, str]:
    """Spark's own tools for a deployed job: its UI (the first free port from 4040 up, with
    the Structured Streaming tab) and an event log the history server reads. Rolling files,
    so a job that runs for weeks does not grow one file without end."""
    directory = event_log_dir(settings.lake)
    if is_local_path(directory):
        Path(directory.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    return {
        "spark.ui.enabled": "true",
        "spark.ui.port": "4040",
        "spark.port.maxRetries": "64",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": directory,
        "spark.eventLog.rolling.enabled": "true",
        "spark.eventLog.rolling.maxFileSize": "64m",
    }


def retention_conf(settings: Settings) -> dict[str, str]:
    """How many micro-batches Spark keeps in each checkpoint (offset and commit logs, state
    store versions): Spark deletes older ones itself as batches commit."""
    return {MIN_BATCHES_TO_RETAIN: str(settings.maintenance.checkpoint_batches_kept)}


def session_conf(settings: Settings, tools: bool = False) -> dict[str, str]:
    """The Spark settings a session is built with (before the class archive's options):
    the defaults above, then what the settings configure (which wins)."""
    local = LOCAL_CHECKPOINT_CONF if is_local_path(settings.lake.checkpoints) else {}
    configured = {k: str(v) for k, v in settings.spark.conf.items()}
    extra = tools_conf(settings) if tools else {}
    return {**BASE_CONF, **local, **extra, **retention_conf(settings), **configured}


def build_session(settings: Settings, app_name: str = "tideline",
                  tools: bool = False) -> SparkSession:
    """Create (or reuse) the session; Python workers run the interpreter that runs us.
    `tools`: with the Spark UI and an event log (deployed jobs, recomputations)."""
    quiet_py4j()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(settings.spark.master).appName(app_name)
    builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
        "spark.driver.host", "127.0.0.1"
    )
    conf = session_conf(settings, tools)
    archive = driver_options(conf.get(DRIVER_JAVA_OPTIONS))  # streaming/class_archive.py
    if archive is not None:
        conf[DRIVER_JAVA_OPTIONS] = archive
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
