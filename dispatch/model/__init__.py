"""dispatch's value types: the vocabulary, the job spec and plan, the record, the errors.

This package imports nothing else of dispatch, so every other part can depend on it.

The modules of model classes (and ``core/steps.py``) write their field types as objects, not
under ``from __future__ import annotations``: pydantic would compile and evaluate each type
written as text as it makes the class, on every start of every command.
"""
