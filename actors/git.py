"""The Git actor (G1, G2, G4): the module branch and the commit of each verified task."""

from __future__ import annotations

import pykka

from events import catalogue as ev
from lopen.git import Repository
from lopen.workflow.run import ModuleRun


class GitActor(pykka.ThreadingActor):
    def __init__(self, run: ModuleRun, repo: Repository) -> None:
        super().__init__()
        self.run = run
        self.repo = repo

    def ensure_branch(self) -> str:
        branch = f"lopen/{self.run.module}"
        base = self.repo.head() or ""
        created = self.repo.ensure_branch(branch)
        self.run.record(ev.BranchEnsured(branch=branch, created=created, base=base))
        return branch

    def head(self) -> str:
        return self.repo.head() or ""

    def commit_task(self, task_id: str, task_name: str, component: str) -> str | None:
        if not self.run.settings.git.auto_commit:
            return None
        message = f"feat({self.run.module}): {task_name} in {component}"
        sha = self.repo.commit_all(message)
        if sha:
            self.run.record(ev.CommitRecorded(sha=sha, message=message, task_id=task_id))
        return sha
