"""Bring your own kernel: import a function from a C/C++ code base as an operator folder
(`derive`), hand the best kernel back as a patch against the original file (`patch`),
and scaffold an operator folder by hand (`scaffold`)."""
