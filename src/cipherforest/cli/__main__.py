"""``python -m cipherforest.cli``: the ``cipherforest`` console script."""

from . import main

raise SystemExit(main())
