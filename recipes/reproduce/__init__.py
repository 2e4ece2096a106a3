"""Reproduction suites: one command runs a whole study (pretraining, then fine-tuning every task
from several initialisations over a learning-rate grid and seeds) through the same scripts a
user runs, resumes where it stopped, and writes ``results.json``, ``RESULTS.md`` and a PNG.

    python scripts/reproduce.py --suite recipes/reproduce/cpu-mini.yaml [--dry_run]

``suite`` reads and checks the YAML, ``runner`` executes it, ``results`` reads each run's
metric and writes the tables and the plot.
"""

from .results import MetricNotFound, read_metric, summarise
from .runner import RunnerError, run_suite, write_random_init
from .suite import SuiteError, load_suite

__all__ = [
    "MetricNotFound",
    "RunnerError",
    "SuiteError",
    "load_suite",
    "read_metric",
    "run_suite",
    "summarise",
    "write_random_init",
]
