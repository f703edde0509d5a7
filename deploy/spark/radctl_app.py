#!/usr/bin/env python3
"""The driver of a ``radctl`` command submitted with ``spark-submit`` (``deploy/spark/submit-radctl.py``):
``spark-submit --master spark://… deploy/spark/radctl_app.py stream -d ads`` runs ``radctl stream -d ads``
with its Spark session inside the application spark-submit started (executors on the cluster)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a checkout: the packages sit beside deploy/

from operations.cli import app  # noqa: E402

if __name__ == "__main__":
    app(prog_name="radctl")
