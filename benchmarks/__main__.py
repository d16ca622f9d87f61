"""``python -m benchmarks``: run the benchmark suite (``--help`` for the options)."""

from .suite import main

raise SystemExit(main())
