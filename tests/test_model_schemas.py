"""dispatch's model classes build their validation schema on first use, not on import
(``defer_build``): these checks make sure no class's schema can fail only when a person's
command first uses it, and that a record's view shares its parts' schemas."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import pytest

import dispatch
from dispatch.model.base import BUILD_ON_FIRST_USE, Value
from dispatch.model.errors import InvalidError
from dispatch.model.record import Commit, View

LAZY_SCHEMAS = pytest.mark.skipif(
    not BUILD_ON_FIRST_USE, reason="schemas are built on first use from pydantic 2.14 on"
)


def every_model() -> list[type[Value]]:
    for info in pkgutil.walk_packages(dispatch.__path__, "dispatch."):
        if not info.name.endswith(".__main__"):  # that one runs the command
            importlib.import_module(info.name)
    found: list[type[Value]] = []
    todo: list[type[Value]] = [Value]
    while todo:
        for c in todo.pop().__subclasses__():
            found.append(c)
            todo.append(c)
    return found


def test_every_model_class_builds_its_schema() -> None:
    models = every_model()
    assert len(models) > 90
    failed = []
    for model in models:
        try:
            model.model_rebuild()
        except Exception as err:  # noqa: BLE001 - every class is tried, the failures listed
            failed.append(f"{model.__module__}.{model.__qualname__}: {err}")
        else:
            if not model.__pydantic_complete__:
                failed.append(f"{model.__module__}.{model.__qualname__}: not complete")
    assert not failed, "\n".join(failed)


def test_a_class_validates_strictly_on_its_first_use() -> None:
    # A fresh process: nothing has built View's schema before this bad input reaches it.
    code = """
import json
from dispatch.model.errors import InvalidError
from dispatch.model.record import View
assert not View.__pydantic_complete__
try:
    View.load({"header": {}, "commits": [], "extra": 1})
except InvalidError as err:
    print(json.dumps(str(err)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    said = json.loads(done.stdout)
    assert "View.extra = 1: Extra inputs are not permitted" in said
    assert "View.header.job" in said  # the nested header is checked field by field


@LAZY_SCHEMAS
def test_a_view_built_first_holds_the_commit_schema_built_once() -> None:
    code = """
import json
from dispatch.model.record import Commit, Header, View
View.model_rebuild()
print(json.dumps([Header.__pydantic_complete__, Commit.__pydantic_complete__]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [True, True]


def test_a_commit_read_after_its_view_refuses_what_it_refused() -> None:
    View.model_rebuild()
    with pytest.raises(InvalidError, match="Commit.revision"):
        Commit.load({"revision": 1, "entries": []})
