"""Moves that rewrite CUDA code (kernels and their launches); registered in
`catalogue.py`. A move imports `analysis`, `views` and the registry, never another move."""
