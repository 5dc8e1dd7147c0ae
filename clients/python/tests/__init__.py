"""The Python client's own tests (run: make client-test, or from clients/python:
python3 -m unittest discover -s tests -t . -v).

They use the server's integration-test support (Tests/Integration/support.py: the real
xhrpcd and the fixture upstream), so this puts that folder on sys.path, and their own
folder too, so that ``import support`` works whichever way they are run.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_integration = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(_here))), "Tests", "Integration")
for _p in (_integration, _here):
    if _p not in sys.path:
        sys.path.insert(0, _p)
