"""Formats: operator specs, kernel files, expressions, flags. The bottom layer."""

from kernelcrew.kernels.kernelfile import KernelFile, load_kernel, parse_kernel_text
from kernelcrew.kernels.spec import Case, OpSpec, library_ops, load_op

__all__ = ["Case", "KernelFile", "OpSpec", "library_ops", "load_kernel", "load_op",
           "parse_kernel_text"]
