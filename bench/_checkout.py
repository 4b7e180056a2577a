"""Make the bench scripts import the checkout they live in.

``python bench/X.py`` puts ``bench/`` first on ``sys.path``, where ``bench/engine.py``
would shadow the ``engine`` package. Importing this module (first, from a bench
script) drops ``bench/`` from ``sys.path`` and puts the checkout root in front.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
