"""The Sphinx site in docs/ builds with warnings as errors, API reference included.

Runs the build as CI would, in a subprocess with this interpreter: ``python -m sphinx -W
--keep-going -b html docs <out>``. Sphinx and numpydoc come with the ``docs`` extra (part of the
``test`` extra).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_build_with_warnings_as_errors(tmp_path: Path) -> None:
    missing = [m for m in ("sphinx", "numpydoc") if importlib.util.find_spec(m) is None]
    assert not missing, (f"{', '.join(missing)} not installed for {sys.executable}: "
                         "pip install -e '.[docs]' (the test extra includes it)")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(ROOT / "docs"), str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"sphinx failed:\n{done.stderr}\n{done.stdout}"
    api = (tmp_path / "html" / "reference" / "api.html").read_text()
    assert 'id="dstream_kafka.KafkaUtils.createRDD"' in api  # autodoc ran, not an empty page


def test_the_api_reference_documents_every_public_name() -> None:
    import dstream_kafka

    reference = ROOT / "docs" / "reference"
    text = (reference / "api.rst").read_text() + (reference / "errors.rst").read_text()
    documented = {name for name in dstream_kafka.__all__
                  if re.search(rf"dstream_kafka\.{re.escape(name)}\b", text)}
    assert sorted(set(dstream_kafka.__all__) - documented) == []
