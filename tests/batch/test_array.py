"""--array as sbatch reads it: indices, ranges, steps and a throttle; anything else refused
naming the part at fault; each index becomes the spec of one task of the group."""

from __future__ import annotations

import pytest

from dispatch.batch.array import MAX_TASKS, Array, read, tasks
from dispatch.batch.request import build, split
from dispatch.model.errors import InvalidError
from dispatch.model.values import JobSpec


@pytest.mark.parametrize(
    ("value", "indices", "throttle"),
    [
        ("0-15%4", tuple(range(16)), 4),
        ("7", (7,), 0),
        ("1,3,5", (1, 3, 5), 0),
        ("0-9:3", (0, 3, 6, 9), 0),
        ("5,0-2%1", (0, 1, 2, 5), 1),
    ],
)
def test_an_array_reads_its_indices_in_order_and_its_throttle(
    value: str, indices: tuple[int, ...], throttle: int
) -> None:
    got = read(value)
    assert (got.indices, got.throttle) == (indices, throttle)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("0-15%0", "%0 would let no task run; write %1 or more"),
        ("0-15%", "% is not a number of tasks"),
        ("0-15%x", "%x is not a number of tasks"),
        ("", "give the indices"),
        ("%4", "give the indices"),
        ("3-1", "3-1 ends before it starts; write 1-3"),
        ("a-b", "'a-b' is not an index"),
        ("-1", "'-1' is not an index"),
        ("0-9:0", "0-9:0 has a step of 0"),
        ("1,2,1", "index 1 is given twice"),
        ("0-4000001", "above Slurm's largest"),
        (f"0-{MAX_TASKS}", f"more than {MAX_TASKS} tasks"),
    ],
)
def test_a_bad_array_is_refused_naming_what_to_write(value: str, why: str) -> None:
    with pytest.raises(InvalidError, match=why.replace("(", r"\(")) as err:
        read(value)
    assert f"--array={value}" in err.value.message


def test_the_command_lines_array_wins_over_the_scripts_line_as_with_sbatch() -> None:
    text = "#!/bin/bash\n#SBATCH --array=0-3\ntrue\n"
    req = build(split(["--array=5-6%1", "t"]), text, "t", "/w", {})
    assert req.array is not None and req.array.indices == (5, 6) and req.array.throttle == 1
    assert req.spec.script is not None and not any("array" in w for w in req.spec.script.options)
    assert build(split(["t"]), text, "t", "/w", {}).array == Array((0, 1, 2, 3), 0, "0-3")


def test_a_bad_array_line_in_the_script_is_refused_naming_the_line() -> None:
    with pytest.raises(InvalidError, match=r"t line 2: --array=0-3%0: %0 would let no task"):
        build(split(["t"]), "#!/bin/bash\n#SBATCH --array=0-3%0\ntrue\n", "t", "/w", {})


def test_an_array_cannot_take_an_idempotency_key() -> None:
    with pytest.raises(InvalidError, match="leave --key out of an array"):
        build(split(["--key=k", "--array=0-1", "t"]), "#!/bin/bash\ntrue\n", "t", "/w", {})


def test_each_index_is_one_task_of_the_group_with_the_groups_throttle() -> None:
    spec = JobSpec(name="sweep", command=("t",))
    made = tasks(spec, read("2,4%1"), "g" * 16)
    assert [(t.task.group, t.task.index, t.task.throttle) for t in made if t.task] == [
        ("g" * 16, 2, 1),
        ("g" * 16, 4, 1),
    ]
    assert all(t.name == "sweep" and t.command == ("t",) for t in made)
