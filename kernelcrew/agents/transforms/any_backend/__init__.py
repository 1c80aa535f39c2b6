"""Moves for either backend: restrict, unroll pragmas, and the settings (flags, knobs,
a sequence of moves); registered in `catalogue.py`."""
