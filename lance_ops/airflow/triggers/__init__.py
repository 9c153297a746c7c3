"""lance_ops.airflow triggers (Airflow provider layout)."""
