"""kernelfarer: a source-to-source GEMM loop-nest optimizer for C."""

__version__ = "0.1.0"
