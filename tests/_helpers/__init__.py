"""Helpers shared by test modules of several subjects (not a test module: pytest collects
nothing here). Tests import them as ``from _helpers.service import start_server``; the
``tests`` folder is on ``sys.path`` through pytest's ``pythonpath`` setting (pyproject.toml).

Plain functions, classes and constants live here rather than in ``conftest.py`` because tests
use them at import time (module-level constants, ``parametrize`` lists, subclasses) and call
them with arguments; fixtures that set up shared state belong in a ``conftest.py``."""
