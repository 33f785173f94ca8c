"""sbatch's options read as getopt reads them, and the ones dispatch cannot let through."""

from __future__ import annotations

import re

import pytest

from dispatch.adapters.slurm.sbatch_options import (
    OPTIONS,
    REFUSED,
    read_option,
    read_options,
    refusal,
)
from dispatch.model.errors import InvalidError


def names(words: list[str]) -> list[tuple[str, str | None]]:
    return [(g.name, g.value) for g in read_options(words)[0]]


@pytest.mark.parametrize(
    ("words", "expected", "stop"),
    [
        (["--time=10", "run.sh"], [("time", "10")], 1),
        (["--time", "10", "run.sh"], [("time", "10")], 2),
        (["-t10", "run.sh"], [("time", "10")], 1),
        (["-t", "10", "run.sh"], [("time", "10")], 2),
        (["-N2", "-p", "low", "x"], [("nodes", "2"), ("partition", "low")], 3),
        (["-vvO", "x"], [("verbose", None), ("verbose", None), ("overcommit", None)], 1),
        (["-vN", "2", "x"], [("verbose", None), ("nodes", "2")], 2),
        (["--exclusive", "x"], [("exclusive", None)], 1),
        (["--exclusive=user", "x"], [("exclusive", "user")], 1),
        (["--nice", "x"], [("nice", None)], 1),
        (["-k", "x"], [("no-kill", None)], 1),
        (["--part=low", "x"], [("partition", "low")], 1),
        (["--container-image=img", "x"], [("--container-image", "img")], 1),
        (["x", "--time=5"], [], 0),
    ],
)
def test_options_are_read_as_getopt_reads_them(
    words: list[str], expected: list[tuple[str, str | None]], stop: int
) -> None:
    assert names(words) == expected
    assert read_options(words)[1] == stop


def test_an_unknown_long_option_is_passed_through_as_written() -> None:
    [given], used = read_option("--container-mounts=/a:/a", [])
    assert (given.known, given.words, used) == (False, ("--container-mounts=/a:/a",), 1)


@pytest.mark.parametrize(
    ("word", "why"),
    [
        ("--time", "needs a value"),
        ("-t", "needs a value"),
        ("--hold=yes", "takes no value"),
        ("--no", "ambiguous sbatch option"),
        ("-j", "-j is not an sbatch option"),
    ],
)
def test_a_misused_option_is_refused_naming_it(word: str, why: str) -> None:
    with pytest.raises(InvalidError, match=re.escape(why)):
        read_option(word, [])


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_every_refused_option_says_why_and_what_to_do(name: str) -> None:
    [given], _ = read_option(
        f"--{name}=1" if OPTIONS[name][1].name == "REQUIRED" else f"--{name}", []
    )
    why = refusal(given)
    assert why and len(why) > 30
