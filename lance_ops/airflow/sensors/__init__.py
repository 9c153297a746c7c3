"""lance_ops.airflow sensors (Airflow provider layout)."""
