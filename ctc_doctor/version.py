"""The ctc-doctor version (a leaf module: reports and the analyzer import it without a circle)."""

__version__ = "0.1.0"
