"""``python -m conformance.matrix [--check]``: regenerate (or check) the traceability matrix.

The command only; the matrix is built by :mod:`conformance.engine.matrix` (see its docstring).
"""

from __future__ import annotations

import sys

from conformance.engine.matrix import main

if __name__ == "__main__":
    sys.exit(main())
