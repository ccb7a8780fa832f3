"""`lopen pr <module>`: the module's branch proposed as a pull request, and its review comments taken back.

:func:`propose` pushes ``lopen/<module>`` to the remote (``git.pr_remote``, else ``git.remote``, else
``origin``), writes the pull request's body from the module's history — what was built and, per task,
its acceptance criteria, the oracle's verdicts, its commit, its tokens and cost, and the ``lopen replay``
command — into ``.lopen/modules/<module>/pull-request.md``, and opens the pull request with ``gh pr create``
when the GitHub CLI is installed and signed in. Otherwise it returns the URL to open it at (a GitHub
remote's compare page) or, for another host, the branch pushed.

:func:`take_comments` reads the pull request's reviews and comments through ``gh`` and queues each one
not queued before as a message for the model (``UserMessageQueued``, as the TUI's prompt and
``queue_message`` do): the module's next run delivers them.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from events import catalogue as ev
from lopen.app import commands, queries
from lopen.app.tracing import traced
from lopen.errors import LopenError

if TYPE_CHECKING:
    from events.fold import ModuleState, TaskNode
    from lopen.app.context import Project

GITHUB = re.compile(
    r"^(?:https?://(?:[^@/]+@)?|ssh://git@|git@)github\.com[:/](?P<owner>[^/]+)/(?P<repo>[^/]+?)(?:\.git)?/?$"
)
GH_TIMEOUT = 120.0
PUSH_TIMEOUT = 300.0


class PullRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`propose` did: the branch pushed (at ``pushed``) to ``remote`` and the pull request's text.

    ``opened``: ``gh`` opened it, and ``url`` is the pull request's; ``updated``: one was open already
    (a second ``lopen pr``), and ``gh`` replaced its title and text (and marked it ready for review once the
    module is complete); otherwise ``url`` is the page to open it at ("" when the remote is not on GitHub)
    and ``why_not_gh`` says why ``gh`` was not used."""

    module: str
    remote: str
    remote_url: str
    branch: str
    base: str
    pushed: str
    title: str
    body: str
    body_file: str
    draft: bool
    opened: bool = False
    updated: bool = False
    url: str = ""
    why_not_gh: str = ""
    notes: list[str] = []


class CommentsQueued(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`take_comments` queued: ``queued`` new messages, ``skipped`` already queued before."""

    module: str
    number: int
    url: str
    queued: int
    skipped: int
    next_run: str  # the command whose run delivers them


# -- proposing ------------------------------------------------------------------------------------------


def propose(project: Project, module: str, base: str = "", *, use_gh: bool = True, actor: str = "") -> PullRequest:
    """Push ``lopen/<module>`` and open (or prepare) its pull request into ``base`` (default: the branch the
    module was started from, else the remote's default branch). ``actor``: who asked (default ``cli:<user>``)."""
    with traced(project, "lopen pr", actor or commands.cli_actor(), module=module, base=base) as span:
        from lopen.project import ensure_lopen_dir

        root = project.root
        facts = gather(project, module)
        state = facts.state
        branch = state.branch or f"lopen/{module}"
        commits = _commits(root, state, branch)
        remote, remote_url = _remote(project, module)
        base = base or default_base(root, remote, state)
        pushed = _push(root, remote, branch, module)
        notes = []
        if not _on_remote(root, remote, base):
            notes.append(
                f"{base} is not on {remote}: a pull request needs its base there — `git push {remote} {base}`, "
                f"or name another with --base"
            )
        title = title_of(project, module)
        body = render_body(facts, commits, base)
        folder = ensure_lopen_dir(root) / "modules" / module
        folder.mkdir(parents=True, exist_ok=True)
        body_file = folder / "pull-request.md"
        body_file.write_text(body, encoding="utf-8")
        draft = not state.complete
        found = GITHUB.match(remote_url)
        request = PullRequest(
            module=module,
            remote=remote,
            remote_url=remote_url,
            branch=branch,
            base=base,
            pushed=pushed,
            title=title,
            body=body,
            body_file=str(body_file),
            draft=draft,
            url=compare_url(found["owner"], found["repo"], base, branch) if found else "",
            notes=notes,
        )
        gh, why_not = gh_ready(root) if use_gh else (None, "")
        span.update({"lopen.pr.branch": branch, "lopen.pr.pushed": pushed, "lopen.pr.remote": remote})
        if gh is None:
            return msgspec.structs.replace(request, why_not_gh=why_not)
        repo = ["--repo", f"{found['owner']}/{found['repo']}"] if found else []
        open_one = _open_request(gh, root, branch, repo)
        if open_one is not None:
            return _update(gh, root, request, open_one, repo)
        args = [gh, "pr", "create", "--title", title, "--body-file", str(body_file), "--base", base, "--head", branch]
        args += repo
        if draft:
            args.append("--draft")
        done = _run(args, root, GH_TIMEOUT)
        if done.returncode != 0:
            said = _last_line(done.stderr or done.stdout)
            raise LopenError(
                f"gh could not open the pull request of {branch} into {base}",
                said or f"gh pr create exited {done.returncode}",
                f"fix what gh says and run `lopen pr {module}` again",
            )
        urls = re.findall(r"https?://\S+", done.stdout)
        return msgspec.structs.replace(request, opened=True, url=urls[-1] if urls else done.stdout.strip())


def _open_request(gh: str, root: Path, branch: str, repo: list[str]) -> dict[str, Any] | None:
    """The open pull request of ``branch`` (``gh pr view``'s url, state, draft flag and base), or None when
    there is none — gh exits non-zero for a branch without one; a closed or merged one is not reopened."""
    done = _run([gh, "pr", "view", branch, "--json", "url,state,isDraft,baseRefName", *repo], root, GH_TIMEOUT)
    if done.returncode != 0:
        return None
    try:
        view = msgspec.json.decode(done.stdout or "null")
    except msgspec.DecodeError:
        return None
    return view if isinstance(view, dict) and view.get("state") == "OPEN" else None


def _update(gh: str, root: Path, request: PullRequest, open_one: dict[str, Any], repo: list[str]) -> PullRequest:
    """A second ``lopen pr``: the open pull request's title and text replaced by the module's as it is now
    (the branch is pushed already), and a draft marked ready for review once the module is complete."""
    branch, module = request.branch, request.module
    edit = [gh, "pr", "edit", branch, "--title", request.title, "--body-file", request.body_file, *repo]
    done = _run(edit, root, GH_TIMEOUT)
    if done.returncode != 0:
        raise LopenError(
            f"gh could not update the open pull request of {branch}",
            _last_line(done.stderr or done.stdout) or f"gh pr edit exited {done.returncode}",
            f"fix what gh says and run `lopen pr {module}` again (the branch is pushed already)",
        )
    notes = list(request.notes)
    draft = bool(open_one.get("isDraft"))
    if draft and not request.draft:
        ready = _run([gh, "pr", "ready", branch, *repo], root, GH_TIMEOUT)
        if ready.returncode == 0:
            draft = False
        else:
            notes.append(f"still a draft: `gh pr ready {branch}` failed ({_last_line(ready.stderr or ready.stdout)})")
    base = str(open_one.get("baseRefName") or "")
    if base and base != request.base:
        notes.append(f"it is open into {base}, not {request.base}: change its base on GitHub if that is wrong")
    url = str(open_one.get("url") or request.url)
    return msgspec.structs.replace(request, updated=True, url=url, draft=draft, notes=notes)


def compare_url(owner: str, repo: str, base: str, branch: str) -> str:
    """GitHub's page that opens a pull request of ``branch`` into ``base``."""
    return f"https://github.com/{owner}/{repo}/compare/{base}...{branch}?expand=1"


def title_of(project: Project, module: str) -> str:
    """``<module>: <the spec's description>`` (the module's name alone when the spec has none)."""
    from lopen.documents import DocumentError, load_spec

    try:
        _, doc = load_spec(project.root, module)
    except (DocumentError, OSError):
        return f"{module}: built by Lopen from its specification"
    described = doc.front_matter.description if doc.front_matter else ""
    return f"{module}: {described}" if described else f"{module}: built by Lopen from its specification"


class Facts(msgspec.Struct, kw_only=True):
    """What the body tells, read from the store in one go: the fold, every verdict by (scope, target), what
    each task and the module spent, the module's sessions."""

    state: Any  # events.fold.ModuleState
    verdicts: dict[tuple[str, str], list[ev.OracleVerdictRecorded]]
    spent: dict[str, Any]  # task id → TokenTotals
    module_spent: Any  # TokenTotals | None
    sessions: list[str]


def gather(project: Project, module: str) -> Facts:
    """The module's facts; ``LopenError`` when nothing of it was built."""
    from events.selection import module_records

    queries.valid_module(module)
    if not project.has_store():
        raise _not_built(project, module)
    with project.store() as (store, project_id):
        state = queries.state_in(store, module)
        if not state.branch and not any(t.commit for t in state.tasks.values()):
            raise _not_built(project, module)
        views = store.projections
        verdicts: dict[tuple[str, str], list[ev.OracleVerdictRecorded]] = {}
        for rec in module_records(store, project_id, module):
            if isinstance(rec.event, ev.OracleVerdictRecorded):
                verdicts.setdefault((rec.event.scope, rec.event.target), []).append(rec.event)
        return Facts(
            state=state,
            verdicts=verdicts,
            spent=views.tokens.tasks(module),
            module_spent=views.tokens.module(module),
            sessions=[s.id for s in views.sessions.all() if s.module == module and not s.deleted],
        )


def _not_built(project: Project, module: str) -> LopenError:
    near = queries.similar_module(project, module) if not queries.has_spec(project, module) else ""
    return LopenError(
        f"module {module} has not been built" + (f" — did you mean {near}?" if near else ""),
        "this project's history has no run of it: there is no branch lopen/" + module + " to propose",
        f"build it first: `lopen run {module}`" + (f" (or `lopen pr {near}`)" if near else ""),
    )


def _commits(root: Path, state: ModuleState, branch: str) -> list[tuple[str, str]]:
    """(sha, subject) of the branch's commits since the module started, oldest first; ``LopenError`` when
    there are none."""
    from lopen.git import Repository

    repo = Repository(root)
    if repo.tip(branch) is None:
        raise LopenError(
            f"there is no branch {branch} in {root}",
            "the history says the module was built there, but the branch is gone (deleted, or another clone)",
            f"fetch it (`git fetch <remote> {branch}:{branch}`) or build the module again: `lopen run {state.module}`",
        )
    commits = list(reversed(repo.commits_between(state.branch_base, branch))) if state.branch_base else []
    if not commits:
        raise LopenError(
            f"{branch} has no commits to propose",
            "no task of module " + state.module + " has been completed and committed yet",
            f"go on with the run: `lopen run {state.module}`",
        )
    return commits


def _remote(project: Project, module: str) -> tuple[str, str]:
    """The remote to push to (``git.pr_remote``, else ``git.remote``, else ``origin``) and its URL as configured
    (``url.*.insteadOf`` not applied: the address people know it by)."""
    from lopen.git.repository import run_git

    settings = project.settings().git
    remote = settings.pr_remote or settings.remote or "origin"
    if "/" in remote or ":" in remote:  # a URL or a path, not a remote's name
        return remote, remote
    done = run_git(project.root, "config", "--get", f"remote.{remote}.url")
    if done.returncode != 0 or not done.stdout.strip():
        named = run_git(project.root, "remote").stdout.split()
        return_why = f"this repository has no remote named {remote}" + (
            f" (its remotes: {', '.join(named)})" if named else " (it has no remote at all)"
        )
        raise LopenError(
            f"no git remote {remote} to push lopen/{module} to",
            return_why,
            f"add it — `git remote add {remote} <url>` — or name another: `lopen config set git.pr_remote <name>`",
        )
    return remote, done.stdout.strip()


def default_base(root: Path, remote: str, state: ModuleState) -> str:
    """The branch the module started from: a branch of the user's (not Lopen's) that holds the commit the
    module's branch was made at — the one checked out when it is one of them — else the remote's default
    branch."""
    from lopen.git import git

    names: list[str] = []
    if state.branch_base:
        listed = git(root, "for-each-ref", "--contains", state.branch_base, "--format=%(refname:short)", "refs/heads",
                     check=False)  # fmt: skip
        names = [n for n in listed.splitlines() if n and not n.startswith("lopen/")]
    current = git(root, "symbolic-ref", "-q", "--short", "HEAD", check=False)
    if current in names:
        return current
    head = remote_head(root, remote)
    if head and (head in names or not names):
        return head
    if names:
        return sorted(names)[0]
    raise LopenError(
        f"cannot tell which branch to propose lopen/{state.module} into",
        f"no branch of yours holds the commit it started from, and {remote} names no default branch",
        f"name it: `lopen pr {state.module} --base <branch>`",
    )


def remote_head(root: Path, remote: str) -> str:
    """The remote's default branch (what its HEAD names), or ""."""
    done = _run(["git", "ls-remote", "--symref", remote, "HEAD"], root, PUSH_TIMEOUT)
    found = re.search(r"^ref: refs/heads/(\S+)\s+HEAD$", done.stdout, flags=re.M)
    return found[1] if found else ""


def _on_remote(root: Path, remote: str, branch: str) -> bool:
    done = _run(["git", "ls-remote", "--heads", remote, f"refs/heads/{branch}"], root, PUSH_TIMEOUT)
    return done.returncode == 0 and bool(done.stdout.strip())


def _push(root: Path, remote: str, branch: str, module: str) -> str:
    """Push ``branch`` to ``remote`` (never forced); its tip, or a ``LopenError`` with git's reason."""
    from lopen.git import git

    tip = git(root, "rev-parse", "--verify", f"refs/heads/{branch}")
    done = _run(["git", "push", "--porcelain", remote, f"refs/heads/{branch}:refs/heads/{branch}"], root, PUSH_TIMEOUT)
    if done.returncode == 0:
        return tip
    said = "; ".join(line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()[:1] in "!e")
    said = said or _last_line(done.stderr) or f"git push exited {done.returncode}"
    if "rejected" in said or "non-fast-forward" in said or "fetch first" in said:
        how = (
            f"{remote}'s {branch} has commits this one does not (pushed from elsewhere, or the module was reverted "
            f"here): look at them with `git fetch {remote} {branch} && git log {branch}..FETCH_HEAD`; to replace them, "
            f"`git push --force-with-lease {remote} {branch}`, then `lopen pr {module}` again"
        )
    else:
        how = (
            f"check that you may push to {remote} (`git push {remote} {branch}` says more), "
            f"then `lopen pr {module}` again"
        )
    raise LopenError(f"git push of {branch} to {remote} was refused", said, how)


# -- the body -------------------------------------------------------------------------------------------


def render_body(facts: Facts, commits: list[tuple[str, str]], base: str) -> str:
    """The pull request's text, in markdown: what was built, then per task its criteria, the oracle's verdicts,
    its commit, what it spent; the components' and the module's verdicts; every commit; the replay commands."""
    from lopen.term import plural

    state, verdicts = facts.state, facts.verdicts
    subjects = dict(commits)
    tasks = state.ordered_tasks()
    done = sum(t.state == "complete" for t in tasks)
    spent, module_spent = facts.spent, facts.module_spent
    approval = state.approval
    spec = f"docs/requirements/{state.module}/SPECIFICATION.md"
    lines = [
        f"Module **{state.module}**, built by Lopen from `{spec}`"
        + (f", approved by {approval.approver} (spec `{approval.spec_hash[:12]}`)." if approval else "."),
        "",
        f"**{done} of {plural(len(tasks), 'task')} complete** in {plural(len(state.components), 'component')}"
        f" · {plural(len(commits), 'commit')} on `{state.branch or 'lopen/' + state.module}` since `{base}`"
        + (f" · {_spent(module_spent)}" if module_spent is not None else ""),
    ]
    if not state.complete:
        lines += ["", f"> The module is **not complete** ({state.state}): this pull request shows the work so far."]
    lines += ["", "## Tasks"]
    for task in tasks:
        lines += ["", *_task_lines(task, verdicts.get(("task", task.id), []), subjects, spent.get(task.id))]
    checked = [
        (f"component `{slug}`", verdicts[("component", slug)][-1])
        for slug in state.components
        if ("component", slug) in verdicts
    ]
    if ("module", state.module) in verdicts:
        checked.append((f"module `{state.module}`", verdicts[("module", state.module)][-1]))
    if checked:
        lines += ["", "## Components and module, verified", ""]
        lines += [f"- {what}: {_verdict(v)}" for what, v in checked]
    lines += ["", "## Commits", ""]
    lines += [f"- `{sha[:8]}` {subject}" for sha, subject in commits]
    sessions = facts.sessions
    lines += [
        "",
        "## The story",
        "",
        "Every invocation, tool call, verdict and commit is recorded in the project's event store. "
        "To replay it, in the project:",
        "",
        "```sh",
        *(f"lopen replay {sid}" for sid in sessions),
        *(f"lopen log {t.id}  # one task's story, across sessions" for t in tasks[:1]),
        "```",
    ]
    return "\n".join(lines) + "\n"


def _task_lines(
    task: TaskNode, verdicts: list[ev.OracleVerdictRecorded], subjects: dict[str, str], spent: Any
) -> list[str]:
    tick = "x" if task.state == "complete" else " "
    lines = [f"### `{task.id}` {task.name} — {task.state}", ""]
    if task.description:
        lines += [task.description, ""]
    if task.acceptance:
        lines += ["Acceptance criteria:", ""] + [f"- [{tick}] {item}" for item in task.acceptance] + [""]
    if verdicts:
        lines += ["Oracle verdicts:", ""]
        for verdict in verdicts:
            lines.append(f"- {_verdict(verdict)}")
            lines += [f"  - {f.severity}: {_one_line(f.description)}" for f in verdict.findings if not verdict.passed]
        lines.append("")
    if task.commit:
        lines.append(f"Commit: `{task.commit[:8]}` {subjects.get(task.commit, '')}".rstrip())
    if spent is not None:
        lines.append(f"Spent: {_spent(spent)}")
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _verdict(v: ev.OracleVerdictRecorded) -> str:
    mark = "✓ passed" if v.passed else "✗ rejected"
    met = [c.id for c in v.criteria if c.met]
    unmet = [c.id for c in v.criteria if not c.met]
    judged = (f"; met: {', '.join(met)}" if met else "") + (f"; not met: {', '.join(unmet)}" if unmet else "")
    who = f" by {v.model}" if v.model else ""
    return f"{mark} (attempt {v.attempt}{who}{judged}) — {_one_line(v.summary)}"


def _spent(totals: Any) -> str:
    from lopen.term import number, plural

    premium = number(totals.premium)
    return (
        f"{plural(totals.total, 'token')}, {premium} premium request{'' if totals.premium == 1 else 's'}, "
        f"{totals.money} in {plural(totals.calls, 'model call')}"
    )


def _one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# -- review comments ------------------------------------------------------------------------------------


def take_comments(project: Project, module: str, actor: str) -> CommentsQueued:
    """Queue the reviews and comments of ``lopen/<module>``'s pull request, each once, as messages for the
    model's next invocation."""
    with traced(project, "lopen pr --comments", actor, module=module) as span:
        queries.valid_module(module)
        root = project.root
        gh, why_not = gh_ready(root)
        if gh is None:
            raise LopenError(
                "reading the pull request's review comments needs gh, the GitHub CLI",
                why_not,
                "install it (https://cli.github.com), sign in with `gh auth login`, "
                f"then `lopen pr {module} --comments` again",
            )
        branch = f"lopen/{module}"
        view = _gh_json(gh, root, ["pr", "view", branch, "--json", "number,url,reviews,comments"], module)
        number = int(view.get("number") or 0)
        inline = _gh_json(gh, root, ["api", f"repos/{{owner}}/{{repo}}/pulls/{number}/comments", "--paginate"], module)
        texts = comment_messages(number, view, inline if isinstance(inline, list) else [])
        from events.selection import module_records

        with project.store() as (store, project_id):
            records = module_records(store, project_id, module)
            known = {rec.event.text for rec in records if isinstance(rec.event, ev.UserMessageQueued)}
            state = queries.state_in(store, module)
        fresh = [t for t in dict.fromkeys(texts) if t not in known]
        for text in fresh:
            commands.queue_message(project, module, text, actor)
        next_run = f"lopen run {module}" + (" --replan" if state.complete else "")
        span.update({"lopen.pr.number": number, "lopen.pr.queued": len(fresh)})
        return CommentsQueued(
            module=module,
            number=number,
            url=str(view.get("url") or ""),
            queued=len(fresh),
            skipped=len(texts) - len(fresh),
            next_run=next_run,
        )


def comment_messages(number: int, view: dict[str, Any], inline: list[dict[str, Any]]) -> list[str]:
    """One message per review with a text, per comment on a line of the diff, per conversation comment."""

    def who(item: dict[str, Any]) -> str:
        person = item.get("author") or item.get("user") or {}
        login = person.get("login") if isinstance(person, dict) else ""
        return f"@{login}" if login else "a reviewer"

    out = []
    for review in view.get("reviews") or []:
        body = str(review.get("body") or "").strip()
        if body:
            state = str(review.get("state") or "").lower().replace("_", " ")
            out.append(
                f"Review of pull request #{number} by {who(review)}" + (f" ({state})" if state else "") + f": {body}"
            )
    for comment in inline:
        body = str(comment.get("body") or "").strip()
        if body:
            line = comment.get("line") or comment.get("original_line")
            where = str(comment.get("path") or "") + (f":{line}" if line else "")
            out.append(f"Review comment on {where or 'the diff'} (pull request #{number}) by {who(comment)}: {body}")
    for comment in view.get("comments") or []:
        body = str(comment.get("body") or "").strip()
        if body:
            out.append(f"Comment on pull request #{number} by {who(comment)}: {body}")
    return out


def _gh_json(gh: str, root: Path, args: list[str], module: str) -> Any:
    done = _run([gh, *args], root, GH_TIMEOUT)
    if done.returncode != 0:
        raise LopenError(
            f"gh could not read the pull request of lopen/{module}",
            _last_line(done.stderr or done.stdout) or f"gh {' '.join(args[:2])} exited {done.returncode}",
            f"open it first with `lopen pr {module}`; `gh pr view lopen/{module}` says more",
        )
    try:
        return msgspec.json.decode(done.stdout or "null")
    except msgspec.DecodeError as exc:
        raise LopenError(
            f"gh answered something other than JSON for `gh {' '.join(args[:2])}`",
            str(exc),
            "update gh (https://cli.github.com)",
        ) from None


# -- gh and processes -----------------------------------------------------------------------------------


def gh_ready(root: Path) -> tuple[str | None, str]:
    """``gh``'s path when it is installed and signed in (``gh auth status`` exits 0); else None and why not."""
    gh = shutil.which("gh")
    if gh is None:
        return None, "gh (the GitHub CLI) is not on PATH"
    status = _run([gh, "auth", "status"], root, 30.0)
    if status.returncode != 0:
        return None, "gh is not signed in (`gh auth status` failed: " + (
            _last_line(status.stderr) or "no account"
        ) + ")"
    return gh, ""


def _run(args: list[str], root: Path, timeout: float) -> Any:
    """A short-lived child with no terminal prompt (git asking for a password would wait forever)."""
    import subprocess

    from lopen.process import run

    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GH_PROMPT_DISABLED": "1", "NO_COLOR": "1"}
    try:
        return run(args, root, env=env, timeout=timeout, die_with_parent=False)
    except FileNotFoundError as exc:
        raise LopenError(f"{args[0]} is not installed", str(exc), f"install {Path(args[0]).name}") from None
    except subprocess.TimeoutExpired:
        raise LopenError(
            f"`{' '.join(args[:3])}` took longer than {timeout:.0f} s",
            "the remote or GitHub did not answer",
            "check the network and try again",
        ) from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
