"""dispatch's value types: the vocabulary, the job spec and plan, the record, the errors.

This package imports nothing else of dispatch, so every other part can depend on it.
"""
