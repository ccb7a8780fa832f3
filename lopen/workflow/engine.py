"""Starting a module run: the store, the session, the gateway and the actors, wired together.

`run_module` is what `lopen run` calls. It holds the module's run lock, opens or resumes the
session, starts every actor, lets the Conductor loop, and always stops them and the gateway.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pykka

from events import catalogue as ev
from events.locks import module_lock
from events.store import EventStore
from lopen import __version__
from lopen.config import Settings
from lopen.copilot.gateway import Gateway, GatewayConfig, ProviderConfig
from lopen.copilot.locate import find_cli
from lopen.errors import InterventionRequired, LopenError
from lopen.git import Repository
from lopen.workflow.approval import approval
from lopen.workflow.invoke import Invoker
from lopen.workflow.renderer import renderer
from lopen.workflow.run import ModuleRun
from lopen.workflow.steps import Kind


def gateway_config(settings: Settings, root: Path) -> GatewayConfig:
    """With a BYOK provider the CLI keeps its state under `.lopen/copilot/`: no GitHub login is needed."""
    provider = settings.provider
    return GatewayConfig(
        cli_path=find_cli(settings.copilot.cli_path).path,
        default_model=settings.models.building,
        provider=ProviderConfig(
            type=provider.type or "openai",
            base_url=provider.base_url,
            api_key=provider.api_key,
            wire_api=provider.wire_api,
        )
        if provider.base_url
        else None,
        retry_attempts=settings.copilot.retry_attempts,
        retry_base_delay=settings.copilot.retry_base_delay,
        retry_max_delay=settings.copilot.retry_max_delay,
        copilot_home=str(root / ".lopen" / "copilot") if provider.base_url else "",
    )


def unfinished_session(store: EventStore, module: str) -> str | None:
    projections = store.projections
    projections.catch_up()
    candidates = [
        s
        for s in projections.sessions.all()
        if s.module == module and not s.deleted and s.status in ("running", "paused")
    ]
    return max(candidates, key=lambda s: s.started_at).id if candidates else None


def open_session(store: EventStore, module: str, settings: Settings, *, resume: str | None, no_resume: bool) -> str:
    models = {
        "building": settings.models.building,
        "planning": settings.models.planning,
        "oracle": settings.models.oracle,
    }
    previous = resume or (None if no_resume or not settings.session.auto_resume else unfinished_session(store, module))
    if previous:
        from events.recorded import session_stream

        if store.version(session_stream(previous)) == 0:
            raise LopenError(f"no session {previous}", "it is not in the store", "see `lopen session list`")
        store.append(session_stream(previous), [ev.SessionResumed(reason="lopen run")])
        return previous
    started = ev.SessionStarted(lopen_version=__version__, models=models, config_digest=settings.digest())
    return store.new_session_id(module, date.today(), started)


def run_module(
    root: Path,
    module: str,
    settings: Settings,
    say: Callable[[str], None],
    *,
    resume: str | None = None,
    no_resume: bool = False,
    stop_before: str = "",
    message: str | None = None,
    ask: Callable[[str], bool] | None = None,
) -> tuple[int, str, str]:
    """Run the workflow for ``module``; returns (exit code, session id, detail)."""
    from actors.assessor import AssessorActor
    from actors.conductor import ConductorActor
    from actors.git import GitActor
    from actors.guardrail import GuardrailActor
    from actors.messages import VerifyRequest
    from actors.metrics import MetricsActor
    from actors.oracle import OracleActor
    from actors.planner import PlannerActor
    from actors.task_runner import TaskRunnerActor

    store = EventStore.open(root, settings.store.url)
    try:
        if approval(store, module) is None:
            raise InterventionRequired(
                f"the specification of {module} is not approved",
                "Lopen plans and builds only from a specification a person has approved (the human gate)",
                f"review docs/requirements/{module}/SPECIFICATION.md, then run `lopen spec approve {module}`",
            )
        with module_lock(root, module):
            repo = Repository(root)
            if not repo.is_repository():
                repo.init()
            session_id = open_session(store, module, settings, resume=resume, no_resume=no_resume)
            say(f"session {session_id}")
            run = ModuleRun(root, module, session_id, settings, store, repo)
            store.subscribe(renderer(say))
            if message:
                run.queue_message(message)
            with Gateway(gateway_config(settings, root)) as gateway:
                invoker = Invoker(run, gateway.invoke, settings)
                git = GitActor.start(run, repo).proxy()
                oracle = OracleActor.start(run, gateway).proxy()
                run.verifier = lambda scope, target, notes, inv: oracle.verify(
                    VerifyRequest(scope=scope, target=target, notes=notes, invocation_id=inv)
                ).get()
                try:
                    git.ensure_branch().get()
                    conductor = ConductorActor.start(
                        run,
                        assessor=AssessorActor.start(run).proxy(),
                        guardrail=GuardrailActor.start(run, MetricsActor.start(store, module).proxy()).proxy(),
                        planner=PlannerActor.start(run, invoker).proxy(),
                        task_runner=TaskRunnerActor.start(run, invoker, git).proxy(),
                        say=say,
                        stop_before=stop_before,
                        ask=ask,
                    ).proxy()
                    result = conductor.run_module().get()
                finally:
                    pykka.ActorRegistry.stop_all()
            return result.exit_code, session_id, result.detail
    finally:
        store.close()


__all__ = ["Kind", "run_module"]
