"""``python -m benchmarks``: see :mod:`benchmarks.harness`."""

import sys

from benchmarks.harness import main

sys.exit(main())
