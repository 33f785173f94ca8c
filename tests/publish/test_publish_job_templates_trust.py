"""Another user's checkpoint never becomes yours: the job templates' folders, attacked.

The templates trained in ``$TMPDIR/dispatch-<Slurm job>-<epoch>`` (the torchrun one resumed in
``$TMPDIR/dispatch-resume-<Slurm job>-<epoch>``), made with ``mkdir -p``. Eve (uid 2002), who
learns the next Slurm ids from a job of her own, makes those folders first in the shared,
sticky ``TMPDIR``: a complete-looking save there was published into ada's store as ada's step,
and a checkpoint there (named as ada's newest publication, its files of the same sizes) was
what ada's next execution resumed from. Ada (uid 2001) runs each template as its batch shell
would, by bash outside Slurm (the variables a job sees set by hand), with the tiny training
script and a checkpoint folder of her own as the store.

Stand-ins, named as such: where a template calls Slurm or a container runtime (``srun``,
``scontrol``, ``torchrun``, ``podman``), small scripts on the ``PATH`` run the command on this
host as one node would (``srun`` runs its command once; ``torchrun`` runs the training script
as its one rank; the runtime runs the command it is given for the container, here). The
templates' own shell, ``publish`` and the training are real.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path

import local_users
import pytest
from local_users import ADA, EVE

from publish.epoch import Epoch
from publish.posix_store import PosixStore
from publish.resolve import MARKER, resolve

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = ("single_node.sbatch", "container.sbatch", "torchrun_multinode.sbatch")
SLURM_JOB = "4242"

STAND_INS = {
    # srun: every option dropped, the command run once, here.
    "srun": 'while [[ $1 == -* ]]; do shift; done\nexec "$@"\n',
    # scontrol: the one node of the allocation, at this host's address.
    "scontrol": (
        'case "$*" in\n'
        '    "show hostnames "*) echo n1 ;;\n'
        '    "-o show node "*) echo "NodeName=n1 NodeAddr=127.0.0.1" ;;\n'
        "    *) exit 1 ;;\n"
        "esac\n"
    ),
    # torchrun: its options dropped, the training script run as the one rank.
    "torchrun": 'while [[ $1 == --* ]]; do shift; done\nexec python3 "$@"\n',
    # The container runtime: `run ... IMAGE COMMAND...` runs COMMAND here; the rest answer
    # that no container is left.
    "podman": (
        "if [[ $1 == run ]]; then\n"
        '    while [[ $1 != "$CONTAINER_IMAGE" ]]; do shift; done\n'
        '    shift; exec "$@"\n'
        "fi\n"
        '[[ "$1 $2" == "container exists" ]] && exit 1\n'
        "exit 0\n"
    ),
}


class Site:
    """A shared, sticky TMPDIR (as /tmp is), ada's folder, her checkpoint store, and the
    stand-ins, under one place both users can reach."""

    def __init__(self, place: Path) -> None:
        self.tmp = place / "tmp"
        self.tmp.mkdir()
        os.chmod(self.tmp, 0o1777)
        (place / "ada").mkdir()
        self.ada = local_users.give(place / "ada", ADA, 0o700)
        self.store = self.ada / "store"
        bin_ = place / "bin"
        bin_.mkdir()
        os.chmod(bin_, 0o755)
        for name, body in STAND_INS.items():
            (bin_ / name).write_text("#!/bin/bash\n" + body)
            os.chmod(bin_ / name, 0o755)
        self.path = f"{bin_}{os.pathsep}{local_users.bin_folder()}{os.pathsep}/usr/bin:/bin"

    def env(self, epoch: int) -> dict[str, str]:
        """What ada's batch shell sees for execution ``epoch`` of Slurm job 4242."""
        return {
            "PATH": self.path,
            "HOME": str(self.ada),
            "TMPDIR": str(self.tmp),
            "PUBLISH_STORE": str(self.store),
            "DISPATCH_JOB": "ab12",
            "DISPATCH_SUBMISSION": str(epoch // 1_000_000),
            "DISPATCH_EPOCH": str(epoch),
            "SLURM_JOB_ID": SLURM_JOB,
            "SLURM_SUBMIT_DIR": str(self.ada),
            "SLURM_JOB_NODELIST": "n1",
            "SLURM_NNODES": "1",
            "CONTAINER_RUNTIME": "podman",
            "CONTAINER_IMAGE": "localhost/dispatch-compute:test",
        }

    def train(self, template: str, epoch: int) -> str:
        """Run ``template`` as ada for ``epoch``; what it printed (it must exit 0)."""
        argv = ["bash", str(REPO / "job_templates" / template)]
        # torchrun starts the training script itself; the others take the whole command.
        argv += [] if template.startswith("torchrun") else ["python3"]
        argv += [str(REPO / "job_templates" / "tiny_train.py"), "--steps", "200"]
        argv += ["--save-every", "100"]
        done = local_users.run_as(ADA, argv, self.env(epoch), cwd=self.ada)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def newest(self, epoch: int) -> tuple[int, int, Path]:
        """(epoch, step, folder) of the newest publication ``epoch`` resolves to."""
        found = resolve(PosixStore(self.store), Epoch(epoch))
        publication = found.manifest.publication
        return publication.epoch.value, publication.step, Path(found.location)


@pytest.fixture
def site() -> Iterator[Site]:
    local_users.ensure(EVE)
    with local_users.shared_place() as place:
        yield Site(place)


def eve_makes(path: Path, files: dict[str, str]) -> None:
    """Eve makes ``path`` first, open to all, holding ``files``."""
    script = f"mkdir -p -m 777 {path}\n"
    for name, text in files.items():
        target = path / name
        script += f"mkdir -p -m 777 {target.parent}\nprintf %s {shlex.quote(text)} > {target}\n"
    script += f"chmod -R a+rwX {path}\n"
    done = local_users.run_as(EVE, ["bash", "-euc", script], {"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_save_another_user_planted_where_the_job_trains_is_never_published_as_yours(
    site: Site, template: str
) -> None:
    """Eve plants a complete save of step 999 where the template's saves went on the node;
    ada's execution publishes its own steps 100 and 200, never hers. (The torchrun template
    saves in ada's submit folder, where eve cannot write.)"""
    run = f"{SLURM_JOB}-1000000"
    state = json.dumps({"step": 999, "w": 0.0, "b": 0.0})
    save = {"saves/step-999/state.json": state, "saves/step-999/.complete": "999\n"}
    eve_makes(site.tmp / f"dispatch-{run}", save)
    site.train(template, 1_000_000)
    assert site.newest(1_000_000)[:2] == (1_000_000, 200)
    planted = site.tmp / f"dispatch-{run}" / "saves"
    assert sorted(p.name for p in planted.iterdir()) == ["step-999"], "ada wrote in eve's folder"


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_checkpoint_another_user_planted_where_the_job_resumes_is_never_resumed_from(
    site: Site, template: str
) -> None:
    """Ada's first execution publishes step 200. Eve learns that publication's name and its
    files' sizes, and plants, wherever the next execution would resume from, a checkpoint of
    that name whose state says step 777. Ada's next execution resumes from her step 200."""
    site.train(template, 1_000_000)
    assert site.newest(1_000_000)[1] == 200
    manifest = resolve(PosixStore(site.store), Epoch(1_000_000)).manifest
    forged = json.dumps({"step": 777, "w": 3.0, "b": 1.0})
    files = {
        f.path: forged.ljust(f.size) if f.path == "state.json" else "x" * f.size
        for f in manifest.files
    }
    assert len(files["state.json"]) == next(
        f.size for f in manifest.files if f.path == "state.json"
    )
    run = f"{SLURM_JOB}-1000001"
    planted = {MARKER: manifest.publication.name + "\n", **files}
    eve_makes(site.tmp / f"dispatch-{run}" / "resume", planted)
    eve_makes(site.tmp / f"dispatch-resume-{run}", planted)
    said = site.train(template, 1_000_001)
    assert "resumed from step 200" in said, said
    assert "resumed from step 777" not in said
