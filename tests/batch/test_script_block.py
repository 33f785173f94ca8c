"""A script's directive block is read once, both kinds of line in the order written: each
#SBATCH option with its line, each #DISPATCH line as written, and a late #DISPATCH refused."""

from __future__ import annotations

import pytest

from dispatch.adapters.slurm.sbatch_lines import Line
from dispatch.batch.script_block import SbatchOption, directives, read
from dispatch.model.errors import InvalidError

SCRIPT = """#!/bin/bash
#SBATCH -N 2 --time=4:00:00
#DISPATCH --rule=preempted:resubmit:3
#SBATCH --job-name=finetune
torchrun train.py
"""


def test_both_kinds_of_line_are_read_in_the_order_written() -> None:
    read_in_order = [
        (d.line.number, d.given.name) if isinstance(d, SbatchOption) else (d.number, d.text)
        for d in directives(SCRIPT, "train.sbatch")
    ]
    assert read_in_order == [
        (2, "nodes"),
        (2, "time"),
        (3, "#DISPATCH --rule=preempted:resubmit:3"),
        (4, "job-name"),
    ]


def test_an_option_says_where_it_is_written() -> None:
    first = next(directives(SCRIPT, "train.sbatch"))
    assert isinstance(first, SbatchOption)
    assert first.at == "train.sbatch line 2"
    assert first.where == "train.sbatch line 2: #SBATCH -N 2 --time=4:00:00"
    assert first.line == Line(2, "#SBATCH -N 2 --time=4:00:00")


def test_the_block_says_its_dispatch_options_and_what_dispatch_reads_of_sbatchs() -> None:
    found = read(SCRIPT, "train.sbatch")
    assert found.job_name == "finetune"
    assert [r.budget for r in found.options.rules or ()] == [3]
    assert [o.given.name for o in found.sbatch] == ["nodes", "time", "job-name"]


def test_a_refused_option_is_refused_before_a_fault_further_down() -> None:
    text = "#!/bin/bash\n#SBATCH --clusters=a\n#SBATCH --no-such-option-x=1 -Z\ntrue\n"
    with pytest.raises(InvalidError, match="line 2: #SBATCH --clusters=a: dispatch supervises"):
        read(text, "t.sh")


def test_a_dispatch_line_after_the_first_command_is_refused_once_the_block_is_read() -> None:
    text = "#!/bin/bash\n#SBATCH -N 1\ntrue\n#DISPATCH --rule=preempted:resubmit:1\n"
    read_so_far = []
    with pytest.raises(InvalidError, match="t.sh line 4: #DISPATCH after the first command"):
        for d in directives(text, "t.sh"):
            read_so_far.append(d)
    assert len(read_so_far) == 1
