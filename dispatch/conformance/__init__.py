"""The adapter conformance suite, runnable against any backend through the SPI alone.

from dispatch.conformance import CHECKS, Harness
for check in CHECKS:
    check(harness)
"""

from dispatch.conformance.checks import CHECKS, ConformanceError, Harness

__all__ = ["CHECKS", "ConformanceError", "Harness"]
