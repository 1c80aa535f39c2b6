"""Moves that rewrite CPU code (C/C++ for g++), one module each or a few close ones;
registered in `catalogue.py`. A move imports `analysis`, `views` and the registry, never
another move."""
