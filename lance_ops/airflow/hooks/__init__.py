"""lance_ops.airflow hooks (Airflow provider layout)."""
