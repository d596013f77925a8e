"""Deploy and watch the streaming jobs: each runs as its own Spark application (spark-submit),
supervised through a pid file, judged from its progress reports and Kafka lag, and alerted on.

Modules: `supervisor` (start/stop processes), `health` (pure judgement), `lag`, `reports`,
`restarts`, `alerting`, `watch` (what the `streaming_jobs` DAG calls), `summary` (text).
"""

from spark_jobs.catalog import JOB_NAMES
from spark_jobs.control.monitor.summary import render_summary
from spark_jobs.control.monitor.supervisor import is_running, launch_job, stop_all_jobs, stop_job
from spark_jobs.control.monitor.watch import all_job_statuses, job_status, watch_all_jobs, watch_job

__all__ = [
    "JOB_NAMES",
    "all_job_statuses",
    "is_running",
    "job_status",
    "launch_job",
    "render_summary",
    "stop_all_jobs",
    "stop_job",
    "watch_all_jobs",
    "watch_job",
]
