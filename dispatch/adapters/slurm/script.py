"""Scheduler text out for a batch-script job: the user's script as sbatch's batch script.

Pure functions, no I/O. sbatch reads the batch script on stdin. What it reads is the user's
script with three things added, so that every submission and every requeue runs it as it was
submitted:

* the script's own directive block (the ``#SBATCH`` lines and comments sbatch reads options
  from, up to the first command) is copied first, unchanged, so sbatch reads the very same
  directives; dispatch's options follow on the command line, which sbatch lets win;
* then ``DISPATCH_JOB``, ``DISPATCH_SUBMISSION``, ``DISPATCH_ATTEMPT`` are set, and
  ``DISPATCH_EPOCH`` is computed at run time from ``SLURM_RESTART_COUNT``, because a
  requeued Slurm job keeps the environment it was submitted with (DESIGN §8);
* then the user's script, kept in the record as submitted, is written to a private temporary
  file through the one descriptor that opened it (checked to be this user's empty file, its
  name already removed, so no other user can swap it), and run from that descriptor with the
  interpreter its ``#!`` line names, with its arguments, replacing the shell (so signals Slurm
  sends the batch shell reach the script).

The submitter's environment and folder are not in this text: the transport runs sbatch in
that folder with that environment (``CommandRunner.run_as_submitter``), and sbatch passes it
on as its ``--export`` says, exactly as it would have for the user.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from dispatch.adapters.slurm.render import requeue_option, slurm_name
from dispatch.adapters.slurm.row import comment_text
from dispatch.adapters.slurm.sbatch_lines import directive_block
from dispatch.model.objects import EPOCH_BASE, StartRequest
from dispatch.model.values import BatchScript

# The options dispatch gives every attempt's sbatch, after the user's so that they win:
# the gate, the job's name (the user's, as sbatch would give it), the comment by which find
# knows the object and reads its numbers back, and no rerun by Slurm
# itself (recovery is dispatch's; a requeue rule sets the bit when it fires), unless a rule
# lets the job requeue itself (render.requeue_option).
DISPATCH_OPTIONS = ("--parsable", "--hold")

# The exit status of the wrapper when it cannot set the script up on the node.
SETUP_FAILED = 97

_RUN = """\
# dispatch: this execution's numbers and epoch, then the script as it was submitted.
DISPATCH_JOB={job}
DISPATCH_SUBMISSION={submission}
DISPATCH_ATTEMPT={attempt}
DISPATCH_RESTARTS="${{SLURM_RESTART_COUNT:-0}}"
DISPATCH_EPOCH=$(( DISPATCH_SUBMISSION * {base} + DISPATCH_RESTARTS ))
export DISPATCH_JOB DISPATCH_SUBMISSION DISPATCH_ATTEMPT DISPATCH_RESTARTS DISPATCH_EPOCH
dispatch_script=$(PATH="/usr/bin:/bin:$PATH" mktemp "${{TMPDIR:-/tmp}}/dispatch-script.XXXXXXXX" \\
    2>/dev/null || PATH="/usr/bin:/bin:$PATH" mktemp /tmp/dispatch-script.XXXXXXXX) || {{
    echo "dispatch: cannot write the job's script to a temporary file" >&2
    exit {failed}
}}
# The name is opened once and removed at once: the script is written to and read from this
# descriptor only, as another user may swap the name in a TMPDIR they can write to.
command exec 9<>"$dispatch_script" || {{
    echo "dispatch: cannot open the temporary file $dispatch_script" >&2
    exit {failed}
}}
PATH="/usr/bin:/bin:$PATH" rm -f "$dispatch_script"
# The descriptor must be the file mktemp made: a regular file of this user, empty, and now
# without a name. Anything else was put there by someone else: refuse to run.
if ! [ -f /dev/fd/9 ] || [ "$(PATH="/usr/bin:/bin:$PATH" stat -L -c %u:%h:%s /dev/fd/9)" != \\
    "$(PATH="/usr/bin:/bin:$PATH" id -u):0:0" ]; then
    echo "dispatch: the temporary file $dispatch_script was replaced by another user;" \\
        "not running it (give the job a TMPDIR only you can write to)" >&2
    exit {failed}
fi
unset dispatch_script
# A quoted word, not a here-document: a shell may keep a here-document in a TMPDIR file.
command printf %s {text} >&9
exec {command}
"""


def interpreter(text: str) -> list[str]:
    """The interpreter and its one optional argument from the ``#!`` line, as Linux reads it:
    the path up to the first blank, and the rest of the line (trimmed) as one argument."""
    first = text.split("\n", 1)[0][2:].strip()
    path, _, arg = first.partition(" ")
    if "\t" in path:
        path, _, rest = path.partition("\t")
        arg = f"{rest} {arg}".strip()
    arg = arg.strip()
    return [path, arg] if arg else [path]


def wrapper(req: StartRequest, script: BatchScript, *, group: str = "") -> str:
    """The batch script sbatch reads for one attempt of a batch-script job; with ``group``,
    for every element of that group's one array, each of which runs its own task
    (``<group>_<index>``, the index Slurm gives the element)."""
    text = script.text if script.text.endswith("\n") else script.text + "\n"
    block = directive_block(text)
    command = shlex.join([*interpreter(text), "/dev/fd/9", *script.args])
    return (
        "#!/bin/sh\n"
        + "".join(f"{line}\n" for line in block)
        + _RUN.format(
            job=f'{shlex.quote(group)}_"$SLURM_ARRAY_TASK_ID"' if group else shlex.quote(req.job),
            submission=req.lineage_submission,
            attempt=req.attempt,
            base=EPOCH_BASE,
            failed=SETUP_FAILED,
            text=shlex.quote(text),
            command=command,
        )
    )


def sbatch_argv(req: StartRequest, script: BatchScript, *, test_only: bool = False) -> list[str]:
    """The sbatch call for one attempt: the user's options, then dispatch's, which win.

    ``test_only`` asks Slurm to check the request and create nothing (``--test-only``).
    """
    # The check leaves the gate out: a held job has no start time for Slurm to estimate.
    ours = [o for o in DISPATCH_OPTIONS if not (test_only and o == "--hold")]
    argv = [
        "sbatch",
        *script.options,
        *ours,
        requeue_option(req.spec),
        f"--job-name={slurm_name(req)}",
        f"--comment={comment_text(req.job, req.submission, req.attempt)}",
    ]
    if req.spec.task is not None:
        # A task submitted on its own is a one-index array (its group's first ones are the
        # elements of one: group_sbatch_argv), so its script sees SLURM_ARRAY_TASK_ID as under
        # sbatch --array; every submission of the task is one such array.
        argv.append(f"--array={req.spec.task.index}")
    if test_only:
        argv.append("--test-only")
    return argv


def group_sbatch_argv(
    req: StartRequest, script: BatchScript, group: str, indices: str
) -> list[str]:
    """The sbatch call that creates a group's one array, every element held: the first
    attempt of each task whose index ``indices`` names (``0-3,7``), with the group's throttle
    as the array's (``%N``), its comment naming the group so that each element reads as its
    task; its name is the job's, as under sbatch --array."""
    task = req.spec.task
    assert task is not None
    argv = sbatch_argv(req, script)
    argv = [a for a in argv if not a.startswith(("--comment=", "--array="))]
    throttle = f"%{task.throttle}" if task.throttle else ""
    comment = comment_text(group, req.submission, req.attempt)
    return [*argv, f"--comment={comment}", f"--array={indices}{throttle}"]


def index_text(indices: Iterable[int]) -> str:
    """Array indices as sbatch's ``--array`` takes them, runs written as ranges (``0-3,7``)."""
    runs: list[list[int]] = []
    for i in sorted(set(indices)):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
