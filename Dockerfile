# Image for the whole platform: Java 17 for Spark, the pinned Python packages, Tideline.
# `docker run -p 127.0.0.1:19092:19092 tideline demo` runs the demo; any `tideline` command works.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/tideline
COPY requirements.lock pyproject.toml ./
RUN pip install --no-cache-dir -r requirements.lock
COPY spark_jobs ./spark_jobs
COPY dags ./dags
COPY expectations ./expectations
COPY infra ./infra
RUN pip install --no-cache-dir --no-deps -e .

ENV TIDELINE_LAKE__ROOT=/var/lib/tideline/lake \
    PYSPARK_PYTHON=/usr/local/bin/python
VOLUME ["/var/lib/tideline"]
ENTRYPOINT ["tideline"]
CMD ["demo"]
