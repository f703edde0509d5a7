"""The datasource spec: Druid's ``dataSchema`` plus radstack's ``processing`` section.

One spec drives the streaming job, the batch job, native batch tasks and the ingestion specs exported
to a real Druid cluster, so it is parsed and validated once, here, into frozen dataclasses.

Accepted inputs (:func:`load_datasource_spec`, :func:`parse_data_schema`):

* a bare Druid ``dataSchema`` object;
* a Druid ingestion spec ``{"type": "index_parallel", "spec": {"dataSchema": …, "ioConfig": …}}``
  (only the ``dataSchema`` is read here; the task API reads ``ioConfig`` itself);
* radstack's datasource spec file (YAML or JSON): ``{"dataSchema": …, "processing": {…}}``.

Druid's defaults apply: ``timestampSpec.column`` ``timestamp``, ``format`` ``auto``;
``segmentGranularity`` ``DAY``, ``queryGranularity`` ``NONE``, ``rollup`` true. An empty dimension
list means schemaless discovery (:meth:`DataSchema.resolve_dimensions`). Every error is a
:class:`SpecError` whose message starts with the path of the bad field, e.g.
``dataSchema.granularitySpec.segmentGranularity: unknown granularity 'fortnight'``.

The model is :mod:`.model`, the ``dataSchema`` parser :mod:`.data_schema`, the ``processing`` section
and spec files :mod:`.datasource`.
"""

from radstack.spec.data_schema import parse_data_schema
from radstack.spec.datasource import load_datasource_spec, parse_processing
from radstack.spec.model import (
    ARRAY_TYPES,
    DIMENSION_TYPES,
    METRIC_TYPES,
    MULTI_VALUE_HANDLING,
    TIME_COLUMN,
    TIMESTAMP_FORMATS,
    DataSchema,
    DatasourceSpec,
    DimensionSchema,
    GranularitySpec,
    JoinSpec,
    LookupSpec,
    MetricSpec,
    ProcessingSpec,
    SpecError,
    TimestampSpec,
    Transform,
)

__all__ = [
    "SpecError",
    "TimestampSpec",
    "DimensionSchema",
    "MetricSpec",
    "GranularitySpec",
    "Transform",
    "DataSchema",
    "JoinSpec",
    "LookupSpec",
    "ProcessingSpec",
    "DatasourceSpec",
    "TIME_COLUMN",
    "TIMESTAMP_FORMATS",
    "DIMENSION_TYPES",
    "MULTI_VALUE_HANDLING",
    "ARRAY_TYPES",
    "METRIC_TYPES",
    "parse_data_schema",
    "parse_processing",
    "load_datasource_spec",
]
