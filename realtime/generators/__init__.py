"""Seeded, rate-limited sample event streams (``radctl generate``): ``ads`` (the RADStack paper's
impressions + clicks) and ``netflow`` (sFlow packet samples + AS / DNS enrichment tables)."""

from realtime.generators.common import Emit, GeneratorOptions, RunSummary, run

__all__ = ["Emit", "GeneratorOptions", "RunSummary", "run"]
