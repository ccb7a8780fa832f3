"""One model invocation of the workflow: prompt, tools, the gateway call, and its events.

Token usage is recorded once, when the invocation finishes: an invocation cut off mid-way
(crash, kill) has recorded no usage, so resumed totals never count half an invocation twice.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable

import msgspec

from events import catalogue as ev
from lopen.config import Settings
from lopen.copilot import InvocationRequest, InvocationResult
from lopen.copilot.results import ModelFellBack, RetryScheduled, StreamEvent, ToolFinished
from lopen.documents.context import Kind as ContextKind
from lopen.documents.context import assemble_context
from lopen.workflow.discipline import analyze, content_hash, exit_code
from lopen.workflow.models import premium_requests
from lopen.workflow.prompts import PromptContext, system_message, user_prompt
from lopen.workflow.run import ModuleRun
from lopen.workflow.steps import Kind, phase_of, toolset
from lopen.workflow.toolbox import Toolbox

RESULT_SUMMARY = 300
# The document context each kind of invocation gets (lopen.documents.context): a component's
# verification reads like the oracle's — its acceptance criteria, its sections and the hooks.
CONTEXT_KINDS: dict[Kind, ContextKind] = {
    Kind.SPEC: "spec",
    Kind.PLANNING: "planning",
    Kind.TASK: "task",
    Kind.COMPONENT_VERIFICATION: "oracle",
    Kind.MODULE_VERIFICATION: "module-verification",
    Kind.ORACLE: "oracle",
}
_counter = itertools.count(1)


class Outcome(msgspec.Struct, frozen=True):
    ok: bool
    detail: str = ""
    error_kind: str = ""
    invocation_id: str = ""


def new_invocation_id(kind: Kind) -> str:
    return f"{kind.value}-{uuid.uuid4().hex[:8]}"


class Invoker:
    """Runs invocations for one module run; `invoke_gateway` is the gateway's invoke."""

    def __init__(self, run: ModuleRun, invoke_gateway: Callable[..., InvocationResult], settings: Settings) -> None:
        self.run = run
        self.invoke_gateway = invoke_gateway
        self.settings = settings

    def models_for(self, kind: Kind) -> list[str]:
        models = self.settings.models
        primary = {
            Kind.SPEC: models.requirement_gathering,
            Kind.PLANNING: models.planning,
            Kind.ORACLE: models.oracle,
        }.get(kind, models.building)
        chain = list(dict.fromkeys([primary, *models.fallback]))
        return [m for m in chain if m not in self.run.state.unavailable] or chain

    def invoke(
        self,
        kind: Kind,
        step: int,
        *,
        component: str = "",
        task: str = "",
        task_text: str = "",
        notes: tuple[str, ...] = (),
        last_task_of_component: bool = False,
        budget_hint: str = "",
    ) -> tuple[Outcome, Toolbox]:
        invocation_id = new_invocation_id(kind)
        toolbox = Toolbox(self.run, invocation_id=invocation_id, step=step, component=component, task=task)
        names = toolset(kind, last_task_of_component)
        context = assemble_context(
            self.run.root,
            self.run.module,
            CONTEXT_KINDS[kind],
            component=component or None,
            task=task_text or None,
            budget_tokens=self.settings.context.token_budget,
        )
        prompt_ctx = PromptContext(
            module=self.run.module,
            kind=kind,
            step=step,
            component=component,
            task=task,
            task_text=task_text,
            context_text=context.text,
            tools=names,
            budget_hint=budget_hint,
            notes=notes,
        )
        request = InvocationRequest(
            models=self.models_for(kind),
            prompt=user_prompt(prompt_ctx),
            system_message=system_message(prompt_ctx),
            working_directory=str(self.run.root),
            timeout=self.settings.copilot.invocation_timeout,
        )
        self.run.record(
            ev.InvocationStarted(
                invocation_id=invocation_id,
                phase=phase_of(step).value,
                step=step,
                kind=kind.value,
                model=request.models[0],
                component=component,
                task=task,
                prompt_size=len(request.prompt) + len(request.system_message),
                sections_sent=tuple(context.sections_sent),
            )
        )
        result = self.invoke_gateway(request, toolbox.tools(names), self._streamer(invocation_id))
        self.record_finish(invocation_id, result)
        outcome = Outcome(
            ok=result.error is None,
            detail=result.error.message if result.error else result.final_message,
            error_kind=result.error.kind.value if result.error else "",
            invocation_id=invocation_id,
        )
        return outcome, toolbox

    def _streamer(self, invocation_id: str) -> Callable[[StreamEvent], None]:
        def on_event(event: StreamEvent) -> None:
            if isinstance(event, ToolFinished):
                record = event.record
                arguments = record.arguments if isinstance(record.arguments, dict) else {"raw": record.arguments}
                self.run.record(
                    ev.ToolCalled(
                        invocation_id=invocation_id,
                        tool=record.name,
                        arguments=arguments,
                        success=record.success,
                        result_summary=record.result[:RESULT_SUMMARY],
                        duration=record.duration,
                        exit_code=exit_code(record.result) if record.name == "bash" else None,
                        result_hash=content_hash(record.result),
                    )
                )
            elif isinstance(event, ModelFellBack):
                self.run.record(
                    ev.ModelFellBack(
                        invocation_id=invocation_id, from_model=event.from_model, to_model=event.to_model, why=event.why
                    )
                )
            elif isinstance(event, RetryScheduled):
                self.run.record(
                    ev.GuardrailTripped(
                        category="retry",
                        level="warn",
                        # the CLI does not say how long it waits (it honours Retry-After): no "in 0.0 s"
                        detail=f"{event.model}: {event.reason}, retry {event.attempt} by the {event.by}"
                        + (f" in {event.delay:.1f} s" if event.delay > 0 else ""),
                    )
                )

        return on_event

    def record_finish(self, invocation_id: str, result: InvocationResult) -> None:
        events: list[ev.Event] = []
        charged = False
        for model, usage in result.usage.per_model.items():
            premium = 0.0 if charged else premium_requests(model)
            charged = charged or premium > 0
            events.append(
                ev.TokensUsed(
                    invocation_id=invocation_id,
                    model=model,
                    input=usage.input,
                    output=usage.output,
                    cache_read=usage.cache_read,
                    cache_write=usage.cache_write,
                    premium=premium,
                )
            )
        if result.context.limit:
            events.append(
                ev.ContextWindowMeasured(
                    invocation_id=invocation_id, used=result.context.used, limit=result.context.limit
                )
            )
        discipline = self.settings.tool_discipline
        for finding in analyze(
            result.tool_calls,
            discipline.max_file_reads,
            discipline.max_command_retries,
            working_directory=str(self.run.root),
        ):
            events.append(
                ev.CorrectiveInstructionIssued(
                    invocation_id=invocation_id, category=finding.category, instruction=finding.instruction
                )
            )
        events.append(
            ev.InvocationFinished(
                invocation_id=invocation_id,
                outcome="ok" if result.error is None else "error",
                error_kind=result.error.kind.value if result.error else "",
                duration=result.duration,
            )
        )
        self.run.record(*events)
