"""Storage layer: the segment write path shared by the streaming job, the batch job and the broker.

DataSegment ids and versions, the segment file format, the indexer, the versioned timeline, the
metadata store, deep storage, the atomic publish, the raw archive's layout and compaction. It imports
only the core (``radstack.*`` modules); see docs/architecture.md.
"""
