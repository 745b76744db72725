"""The command line (``joblocks``/``python -m joblocks``), run as real processes."""
