"""Airflow around Tideline: its environment, a standalone instance, its REST API, and the
small helpers the DAG files share (so `dags/` stays thin)."""
