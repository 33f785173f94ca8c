"""The one base of every dispatch value: frozen, no extra fields, errors as ``InvalidError``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import VERSION, BaseModel, ConfigDict, ValidationError

# pydantic v2 exports its model metaclass only from this module; subclassing it is how a model
# class customises construction.
from pydantic._internal._model_construction import ModelMetaclass

from dispatch.model.errors import InvalidError

# A class builds its validation schema on its first use rather than at import, which most
# commands never reach for most classes (docs/sbatch.md). Only from pydantic 2.14 on: before
# it, two threads using a class for the first time at once could each rebuild it, and one
# could meanwhile validate with the base class's schema (the demo and the library's ``watch``
# use models from a second thread).
BUILD_ON_FIRST_USE = tuple(int(p) for p in VERSION.split(".")[:2]) >= (2, 14)


def describe(model: str, err: ValidationError) -> str:
    """One line per problem: the field's dotted path, the value given, and what is wrong."""
    parts = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(value)"
        given = e.get("input")
        shown = repr(given)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        parts.append(f"{model}.{where} = {shown}: {e['msg']}")
    return "; ".join(parts)


class _RaisesInvalid(ModelMetaclass):
    """Turns pydantic's ValidationError into InvalidError where a value is built by a call.

    Done in the metaclass rather than in ``__init__``: a model with its own ``__init__`` makes
    pydantic call back into Python for every nested value it validates, which is most of the
    cost of reading a long record.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as err:
            raise InvalidError(describe(cls.__name__, err)) from None


class Value(BaseModel, metaclass=_RaisesInvalid):
    """A frozen value; building one from bad input raises ``InvalidError``."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_enum_values=False, defer_build=BUILD_ON_FIRST_USE
    )

    @classmethod
    def load(cls, data: Any) -> Any:
        """Validate stored or foreign data (a dict, or JSON text) into this type."""
        # What ``model_validate_json`` and ``model_validate`` call, without their handling of
        # options this never gives: a sweep validates every file of every record it reads.
        try:
            if isinstance(data, str | bytes):
                return cls.__pydantic_validator__.validate_json(data)
            return cls.__pydantic_validator__.validate_python(data)
        except ValidationError as err:
            raise InvalidError(describe(cls.__name__, err)) from None


def format_duration(d: timedelta) -> str:
    """A duration as hours, minutes and seconds, e.g. ``24h0m0s`` or ``1m30s``."""
    total = d.total_seconds()
    sign = "-" if total < 0 else ""
    total = abs(total)
    hours, rest = divmod(int(total), 3600)
    minutes, seconds = divmod(rest, 60)
    frac = total - int(total)
    sec = f"{seconds + frac:g}" if frac else str(seconds)
    if hours:
        return f"{sign}{hours}h{minutes}m{sec}s"
    if minutes:
        return f"{sign}{minutes}m{sec}s"
    return f"{sign}{sec}s"
