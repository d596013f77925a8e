"""A private PostgreSQL cluster on 127.0.0.1 (`tideline postgres`), from the machine's own
PostgreSQL binaries: the production-grade home of the experiment metadata and of Airflow's
metadata database, where SQLite is the embedded default."""
