"""lance_ops.airflow operators (Airflow provider layout)."""
