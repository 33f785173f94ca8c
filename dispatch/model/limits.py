"""Bounds the values of the model share with the config file, importable without pydantic:
cron's ``dispatch sweep`` reads its config on every tick."""

from __future__ import annotations

from datetime import timedelta

# The longest hold, time limit or deadline a value may name: far longer ones are typing
# mistakes, and the time now plus any of them must stay a date (the config's own limit too).
MAX_DURATION = timedelta(days=365)
