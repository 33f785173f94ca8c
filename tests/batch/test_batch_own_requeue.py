"""A script whose program may requeue its own job (``dispatch.batch.own_requeue``): the plan
says what happens to that requeue, the job is submitted so that Slurm takes it (and the
supervisor judges it) unless the user forbade it, and a ``--no-requeue`` beside a rule that lets
the job requeue itself is refused."""

from __future__ import annotations

import pytest

from dispatch.adapters.slurm.render import requeue_option
from dispatch.batch import request
from dispatch.model.errors import InvalidError

# facebookresearch/lingua's shape: a signal before the time limit, no --requeue line; the
# program runs scontrol requeue in its handler.
LINGUA = "#!/bin/bash\n#SBATCH --signal=USR2@120\n#SBATCH --nodes=1\nsrun python3 train.py\n"
RULE = "#DISPATCH --rule=requeued:requeue:5\n"


def build(text: str, *words: str) -> request.Request:
    cmd = request.split([*words, "job.sbatch"])
    return request.build(cmd, text, "job.sbatch", "/home/ada", {})


def test_a_signal_without_a_rule_stays_no_requeue_and_the_plan_says_what_follows() -> None:
    # A signal alone may be a save-and-exit (dispatch's own templates): Slurm is not asked to
    # take a requeue nobody said the program makes, and the plan says how to let it.
    built = build(LINGUA)
    assert not built.spec.requeueable and requeue_option(built.spec) == "--no-requeue"
    (note,) = [n for n in built.notes if "requeue its own job" in n]
    assert note.startswith("job.sbatch line 2: --signal")
    assert "Slurm refuses that requeue" in note and "exit 0 reads as succeeded" in note
    assert "--rule=requeued:requeue:N" in note


def test_a_script_that_requeues_itself_is_submitted_requeueable_and_judged() -> None:
    built = build(LINGUA + 'scontrol requeue "$SLURM_JOB_ID"\n')
    script = built.spec.script
    assert script is not None and script.requeues_itself and built.spec.requeueable
    assert requeue_option(built.spec) == "--requeue"
    (note,) = [n for n in built.notes if "requeue its own job" in n]
    assert note.startswith("job.sbatch line 5: scontrol requeue")
    assert "fails with cause requeued" in note and "--rule=requeued:requeue:N" in note


def test_a_rule_that_lets_it_requeue_itself_says_nothing_more() -> None:
    built = build(LINGUA.replace("#SBATCH --nodes", RULE + "#SBATCH --nodes"))
    assert built.spec.own_requeue and requeue_option(built.spec) == "--requeue"
    assert not [n for n in built.notes if "requeue its own job" in n]


def test_another_rule_on_requeued_is_named_as_what_acts() -> None:
    text = LINGUA.replace(
        "#SBATCH --nodes", "#DISPATCH --rule=requeued:resubmit:2\n#SBATCH --nodes"
    )
    text += "scontrol requeue $SLURM_JOB_ID\n"
    (note,) = [n for n in build(text).notes if "requeue its own job" in n]
    assert "rule 0 (resubmit) acts on it" in note


def test_scontrol_requeue_in_the_script_is_a_sign_too() -> None:
    text = "#!/bin/bash\n#SBATCH --nodes=1\ntrap 'scontrol requeue $SLURM_JOB_ID' USR1\nwait\n"
    built = build(text)
    assert built.spec.requeueable
    assert any(n.startswith("job.sbatch line 3: scontrol requeue") for n in built.notes)


def test_a_script_with_no_sign_stays_no_requeue() -> None:
    built = build("#!/bin/bash\n#SBATCH --nodes=1\nsrun python3 train.py\n")
    assert not built.spec.requeueable and requeue_option(built.spec) == "--no-requeue"
    assert not [n for n in built.notes if "requeue" in n]


@pytest.mark.parametrize(
    ("text", "words", "where"),
    [
        (LINGUA.replace("#SBATCH --nodes", "#SBATCH --no-requeue\n#SBATCH --nodes"), (), "line 3"),
        (LINGUA, ("--no-requeue",), "the command line"),
    ],
)
def test_no_requeue_is_kept_and_said(text: str, words: tuple[str, ...], where: str) -> None:
    built = build(text, *words)
    assert not built.spec.requeueable and requeue_option(built.spec) == "--no-requeue"
    (note,) = [n for n in built.notes if "requeue its own job" in n]
    assert f"{where}: --no-requeue Slurm refuses that requeue, as you asked" in note
    with_rule = text.replace("#SBATCH --signal", RULE + "#SBATCH --signal")
    with pytest.raises(InvalidError, match=r"--no-requeue: rule 0 .* remove one"):
        build(with_rule, *words)


def test_under_a_shared_checkpoint_the_requeue_is_refused_and_said() -> None:
    text = LINGUA.replace("#SBATCH --nodes", "#DISPATCH --checkpoint=shared\n#SBATCH --nodes")
    built = build(text + "scontrol requeue $SLURM_JOB_ID\n")
    assert not built.spec.requeueable
    assert any("shared checkpoint" in n for n in built.notes)
