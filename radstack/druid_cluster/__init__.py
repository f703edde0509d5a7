"""The Druid-cluster path: ingestion specs for a real Apache Druid generated from radstack's datasource
specs (:mod:`radstack.druid_cluster.specs`) and a client that submits them to an Overlord and follows
the tasks (:mod:`radstack.druid_cluster.submit`). See ``docs/druid-cluster.md``."""
