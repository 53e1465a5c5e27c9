"""One module per subcommand of ``memtop`` (``memtop/cli.py`` keeps the top-level parser and the
dispatch): ``tui`` (``memtop``), ``snapshot``, ``record``, ``replay``, ``batch`` (``--batch``),
``export``, ``doctor``; ``args`` holds the argument types and the options they share, ``common``
the live source and the checks made before anything starts. Each imports what its command needs
only when it runs, so ``memtop --help`` and a usage error stay fast."""
