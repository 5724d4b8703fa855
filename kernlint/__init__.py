"""kernlint: a profiling-driven regression detector for PyTorch GPU code."""
__version__ = "0.1.0"
