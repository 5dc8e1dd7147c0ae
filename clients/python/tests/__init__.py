"""xhrpc Python client tests (run: python3 -m unittest discover -s clients/python/tests -v).

The modules import ``support`` as a top-level module; this puts their folder on
sys.path so discovery with ``-t clients/python`` (tests as a package) works too.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)
