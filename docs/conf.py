"""Sphinx configuration of the dstream_kafka documentation.

Built with warnings as errors by tests/unit/test_docs_build.py (the ``docs`` extra):
``python -m sphinx -W --keep-going -b html docs <out>``.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # autodoc imports the checkout's package, installed or not

import dstream_kafka  # noqa: E402

project = "dstream_kafka"
author = "the dstream_kafka authors"
copyright = "the dstream_kafka authors"
release = dstream_kafka.__version__
version = release

extensions = ["sphinx.ext.autodoc", "numpydoc"]
exclude_patterns = ["_build"]
html_theme = "alabaster"  # Sphinx's built-in theme: no theme package to install

# autodoc: members in source order, PySpark and the optional clients need not be importable
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the signatures carry the hints; numpydoc's sections the semantics
autodoc_mock_imports = ["happybase", "kazoo", "psycopg2", "confluent_kafka", "prometheus_client"]
# numpydoc: no autosummary member tables (they need stub pages); the class docstring documents
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
