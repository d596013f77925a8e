"""The control plane: the monitor that deploys and watches jobs, alerts, spark-submit,
maintenance, the Airflow helpers and Tideline's pages in the Airflow UI."""
