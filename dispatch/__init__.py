"""dispatch package."""
