"""``python -m cipherforest.experiments`` (the ``cipherforest experiments`` command)."""

import sys

from .command import main

sys.exit(main())
