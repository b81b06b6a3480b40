"""The floor archive: every table's events from the broker into PostgreSQL
(``shoe-controller archive``). ``migrate`` owns the schema, ``partitions``
the monthly partitions and retention, ``store`` the idempotent batch write,
``service`` the MQTT side (persistent session, manual acks after COMMIT)."""
