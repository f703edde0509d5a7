-- One PostgreSQL for the metadata of radstack (database radstack, created by the image), Airflow and
-- Druid. Runs once, on an empty data volume.
CREATE DATABASE airflow OWNER radstack;
CREATE DATABASE druid OWNER radstack;
