"""Tideline pages inside the Airflow UI: job status, alerts, validation results, Data Docs."""
