"""Ada at her shell on the local Kubernetes plane, for the tests that run docs/kubeflow.md."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from live_kube import REPO, Plane
from live_user import BIN, User

TEMPLATES = REPO / "job_templates"


class Shell(User):
    """Ada at her shell: a fresh HOME whose ~/.kube/config is her kubeconfig, a project folder
    holding the template, and dispatch and publish on her PATH (no Slurm)."""

    def __init__(self, plane: Plane, tmp: Path) -> None:
        self.home = tmp / "home"
        (self.home / ".kube").mkdir(parents=True)
        shutil.copy(plane.kubeconfig("ada"), self.home / ".kube" / "config")
        self.folder = tmp / "project"
        self.folder.mkdir()
        shutil.copy(TEMPLATES / "trainjob_ddp.yaml", self.folder)
        self.env = {
            "HOME": str(self.home),
            "USER": "ada",
            "LOGNAME": "ada",
            "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
        }
