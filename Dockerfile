# Image for the whole platform: Java 17 for Spark, the pinned Python packages, Tideline.
# `make demo` in a container (the platform: broker, Airflow UI, dashboard, streaming jobs,
# traffic), its state kept in a volume:
#   docker build -t tideline .
#   docker run --rm -it -p 127.0.0.1:8080:8080 -p 127.0.0.1:8050:8050 \
#       -p 127.0.0.1:19092:19092 -p 127.0.0.1:4040-4049:4040-4049 \
#       -v tideline:/var/lib/tideline tideline
# then Ctrl-C, or `docker stop -t 120` (a clean stop of Airflow and the jobs takes longer
# than docker's default 10 s). Any `tideline` command works, e.g. `... tideline platform
# --cluster` (a Spark standalone cluster inside the container; publish 8088 too for its
# master UI) or `... tideline config show`.
FROM python:3.11-slim-bookworm

# Java 17 for Spark (4.3 needs 17 or newer); procps for Spark's scripts; tini as PID 1: it
# passes docker stop's SIGTERM on and reaps the orphans of Airflow's and Spark's processes,
# which a Python PID 1 would leave as zombies.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/tideline
# The pinned packages in a layer of their own: a code change does not reinstall them.
COPY requirements.lock pyproject.toml ./
RUN pip install --no-cache-dir -r requirements.lock
# The code, the DAG folder and the validation suites. Editable, so that dags/ and
# expectations/ are found beside spark_jobs/ as in a checkout. Not infra/: nothing in it runs
# here, and a checkout's infra/airflow_home holds its Airflow database and admin password.
COPY spark_jobs ./spark_jobs
COPY dags ./dags
COPY expectations ./expectations
RUN pip install --no-cache-dir --no-deps -e . \
    && python -c "from spark_jobs.streaming.worker_path import install; install()"
# (the .pth of infra/setup.sh: Spark's Python processes import the installed pyspark, not the
# zip of its sources that Spark puts first on their path and each would compile again)

# Everything that must outlive the container goes to the volume: the lake (tables,
# checkpoints, metadata DB, job logs, the cluster's home) and Airflow's home (its database,
# logs, the generated admin password).
# Servers listen on every interface of the container: with the settings' loopback default a
# published port reaches nothing (the container's 127.0.0.1 is its own). Publish them on the
# host's loopback as above; links (Airflow's base_url, alerts) and the address the broker
# advertises stay 127.0.0.1:<port>, which is right on both sides of `-p 127.0.0.1:P:P`.
# Spark's web UIs (each job's from 4040 up, the cluster's master 8088 with --cluster) listen
# where Spark's own SPARK_LOCAL_IP says, which Tideline otherwise sets to 127.0.0.1; Spark's
# RPC stays on loopback (Tideline passes the driver's and the daemons' addresses explicitly),
# and the UI links on Browse -> Tideline jobs still say 127.0.0.1.
ENV TIDELINE_LAKE__ROOT=/var/lib/tideline/lake \
    TIDELINE_AIRFLOW__HOME=/var/lib/tideline/airflow_home \
    TIDELINE_KAFKA__BROKER_BIND=0.0.0.0 \
    TIDELINE_AIRFLOW__HOST=0.0.0.0 \
    TIDELINE_DASHBOARD__HOST=0.0.0.0 \
    SPARK_LOCAL_IP=0.0.0.0 \
    PYSPARK_PYTHON=/usr/local/bin/python
# Airflow UI, results dashboard, embedded Kafka broker, the jobs' Spark UIs, the master's UI.
EXPOSE 8080 8050 19092 4040-4049 8088
VOLUME ["/var/lib/tideline"]
ENTRYPOINT ["tini", "--", "tideline"]
CMD ["platform"]
