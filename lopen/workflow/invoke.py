"""One model invocation: prompt, tools, the gateway call, and the events it leaves.

Everything is recorded as it happens, through the module's journal: ``InvocationStarted``, each
``ToolCalled`` and ``PermissionDecided`` as it streams, one ``TokensUsed`` per model call the moment
its usage arrives (so a crash loses no call and a resume counts none twice; a gateway retry's calls
and a sub-agent's are counted too, the sub-agent's with its ``agent_id``), ``ModelFellBack``, then
``ContextWindowMeasured``, the tool-discipline findings and ``InvocationFinished``. Premium requests
follow one rule (``lopen.workflow.models.premium_for_call``), the oracle's invocations included; each
call is priced as it is recorded (``lopen.workflow.prices``: ``TokensUsed.cost``).

A spec section too long for the prompt's ``context.token_budget`` is sent as a summary
(``context.summaries``): made once per section content by a tool-less invocation on the oracle's model
chain (``kind="summary"``, under the invocation whose prompt it goes into, recorded like any other and
counted in the budgets), cached under the project's ``.lopen/cache/summaries/``; when it cannot be made
the section is cut as before. ``InvocationStarted.sections_summarised`` and ``sections_cut`` say which.

The budgets hold inside an invocation: before it, the Guardrail says which budgets apply
(``limits(task)``); after every model call is recorded, the gateway asks ``budget()``, which reads the
module's and the task's totals as they are now (``spending(task)``, the Metrics actor's, every lane's
calls included) and names the first budget reached — the gateway then stops the session, so a budget
is overshot by the one call that reached it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from pathlib import Path

import msgspec

from events import catalogue as ev
from events.journal import Fenced, Journal, JournalClosed
from lopen.config import Settings
from lopen.copilot import InvocationRequest, InvocationResult, LopenTool
from lopen.copilot.results import (
    AssistantReasoning,
    AssistantText,
    ErrorKind,
    ModelFellBack,
    PermissionDecision,
    RetryScheduled,
    StreamEvent,
    ToolFinished,
    UsageReported,
)
from lopen.documents.context import Kind as ContextKind
from lopen.documents.context import assemble_context
from lopen.documents.errors import DocumentError
from lopen.documents.instructions import Instructions, render, repository_instructions
from lopen.documents.standards import coding_standards
from lopen.documents.standards import render as render_standards
from lopen.documents.summaries import Summaries, SummaryFailed, SummaryWanted
from lopen.workflow.budgets import Limit, Totals, first_reached
from lopen.workflow.discipline import analyze, content_hash, exit_code
from lopen.workflow.evidence import VERIFY_TESTS, hooks
from lopen.workflow.models import premium_for_call
from lopen.workflow.prices import call_cost, price_of, prices
from lopen.workflow.prompts import (
    GUIDANCE,
    SUMMARY_SYSTEM,
    PromptContext,
    summary_prompt,
    system_message,
    user_prompt,
)
from lopen.workflow.steps import CLI_TOOLS, MCP_KINDS, URL_TOOL, Kind, phase_of, toolset

RESULT_SUMMARY = 300
# What the model says and does mid-invocation (and the permission asked for a tool call) is committed without
# waiting for the disk, while the CLI waits for each streamed event: durable against a killed process at
# once, and against an OS crash or power loss with the next durable commit — the next model call's
# TokensUsed at the latest, which stays durable (S9), as do retries, fall-backs and the invocation's end.
# See docs/store.md, *Crashes*.
UNSYNCED = (ev.ModelSaid, ev.ModelReasoned, ev.ToolCalled, ev.PermissionDecided)
# The document context each kind of invocation gets (lopen.documents.context): a component's
# verification reads like the oracle's — its acceptance criteria, its sections and the hooks.
CONTEXT_KINDS: dict[Kind, ContextKind] = {
    Kind.SPEC: "spec",
    Kind.RESEARCH: "research",
    Kind.PLANNING: "planning",
    Kind.TASK: "task",
    Kind.COMPONENT_VERIFICATION: "oracle",
    Kind.MODULE_VERIFICATION: "module-verification",
    Kind.ORACLE: "oracle",
}

GatewayInvoke = Callable[..., InvocationResult]  # (request, tools, on_event, *, ask=None) — Gateway.invoke
ToolsFor = Callable[[str, int, str, str], "ToolSource"]


class ToolSource:
    """Something that lists Lopen's tools by name for one invocation (``lopen.workflow.toolbox.Toolbox``)."""

    def tools(self, names: tuple[str, ...]) -> list[LopenTool]:  # pragma: no cover - a protocol
        raise NotImplementedError


class Outcome(msgspec.Struct, frozen=True):
    ok: bool
    detail: str = ""
    error_kind: str = ""
    invocation_id: str = ""


def new_invocation_id(kind: Kind) -> str:
    return f"{kind.value}-{uuid.uuid4().hex[:8]}"


class Invoker:
    """Runs the invocations of one module run.

    ``workdir`` is where the model works (the module's worktree; its documents are read there);
    ``tools_for(invocation_id, step, component, task)`` makes the invocation's toolbox;
    ``watch`` receives every stream event too (live views); ``traceparent(invocation_id)`` gives the
    W3C trace context the invocation's spans hang under, when telemetry is on; ``project_root`` is the
    user's checkout, where the approved spec's verify command and the repository's agent instructions
    are read (the model cannot write there).
    """

    def __init__(
        self,
        journal: Journal,
        invoke_gateway: GatewayInvoke,
        settings: Settings,
        workdir: Path,
        tools_for: ToolsFor | None = None,
        *,
        watch: Callable[[str, StreamEvent], None] | None = None,
        traceparent: Callable[[str], str] | None = None,
        project_root: Path | None = None,
        limits: Callable[[str], tuple[Limit, ...]] | None = None,
        spending: Callable[[str], tuple[Totals, Totals]] | None = None,
    ) -> None:
        """``limits(task)`` names the budgets an invocation of ``task`` is stopped inside at, and
        ``spending(task)`` gives the module's and the task's totals now (both None: no budgets)."""
        self.journal = journal
        self.invoke_gateway = invoke_gateway
        self.settings = settings
        self.workdir = workdir
        self.tools_for = tools_for
        self.watch = watch
        self.traceparent = traceparent
        self.project_root = project_root  # the user's checkout: the approved spec, the agent instructions
        self.limits = limits
        self.spending = spending
        self.prices = prices(settings.budget.prices)
        self.count = 0  # invocations this run made (workflow.max_iterations counts these)

    def models_for(self, kind: Kind) -> list[str]:
        models = self.settings.models
        primary = {
            Kind.SPEC: models.requirement_gathering,
            Kind.RESEARCH: models.research,
            Kind.PLANNING: models.planning,
            Kind.ORACLE: models.oracle,
            Kind.SUMMARY: models.oracle,  # the cheap model
        }.get(kind, models.building)
        chain = list(dict.fromkeys([primary, *models.fallback]))
        unavailable = set(self.journal.read(lambda s: list(s.unavailable)))
        return [m for m in chain if m not in unavailable] or chain

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
        ask_user: Callable[[str], str] | None = None,
        parallel: int = 1,
        topics: tuple[str, ...] = (),
    ) -> Outcome:
        """Run one invocation. Its prompt carries the corrective instructions and the person's queued
        messages the history holds for the next invocation (each delivered once: recorded with this
        invocation's id), then ``notes`` (what the caller adds, e.g. a cut-off run's leftovers)."""
        invocation_id = new_invocation_id(kind)
        names = toolset(kind)
        owed, messages = self.journal.read(lambda state: (list(state.notes), dict(state.queued)))
        notes = (*owed, *notes, *(f"Message from the user: {text}" for text in messages.values()))
        toolbox = self.tools_for(invocation_id, step, component, task) if self.tools_for else None
        summaries = None
        if self.settings.context.summaries:
            where = PromptContext(module=self.journal.module, kind=kind, step=step, component=component, task=task)
            summaries = Summaries(self.project_root or self.workdir, self._summariser(where, invocation_id))
        try:
            context = assemble_context(
                self.workdir,
                self.journal.module,
                CONTEXT_KINDS[kind],
                component=component or None,
                task=task_text or None,
                budget_tokens=self.settings.context.token_budget,
                summaries=summaries,
            )
        except JournalClosed:  # stopped while a summary was being made
            return Outcome(ok=False, detail="interrupted", error_kind="interrupted", invocation_id=invocation_id)
        instructions = self._instructions()
        builder = self.settings.copilot.builder_prompt
        prompt_ctx = PromptContext(
            module=self.journal.module,
            kind=kind,
            step=step,
            component=component,
            task=task,
            task_text="" if kind is Kind.TASK else task_text,  # a task's context carries its text
            context_text=context.text,
            tools=names,
            budget_hint=budget_hint,
            notes=notes,
            topics=topics,
            parallel=parallel,
            workdir=str(self.workdir),
            branch=self._branch(component),
            verify=self._verify_command(),
            last_task=last_task_of_component,
            conventions=render(instructions),
            standards=self._standards() if kind is Kind.TASK else "",
        )
        cli_tools: tuple[str, ...] | None = None
        if builder:
            cli_tools = (*self._cli_tools(kind), *(("ask_user",) if ask_user is not None else ()))
        request = InvocationRequest(
            models=self.models_for(kind),
            prompt=user_prompt(prompt_ctx),
            system_message=system_message(prompt_ctx),
            working_directory=str(self.workdir),
            timeout=self.settings.copilot.invocation_timeout,
            max_turns=self.settings.copilot.max_turns_per_invocation,
            max_tokens=self.settings.copilot.max_tokens_per_invocation,
            budget=self._budget(task),
            cli_tools=cli_tools,
            builder=builder,
            guidance=GUIDANCE if builder else "",
            traceparent=self.traceparent(invocation_id) if self.traceparent else "",
            conversation_id=invocation_id,
            mcp=kind in MCP_KINDS and bool(self.settings.mcp.servers),
        )
        try:
            self.journal.record(
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
                    sections_summarised=tuple(context.summarised),
                    sections_cut=tuple(context.cut),
                    instructions=tuple(i.label for i in instructions),
                    cli_tools=cli_tools,
                    prompt=self._keep_prompt(request),
                )
            )
            if messages:  # W11: delivered in this invocation's prompt, once each
                self.journal.record(
                    *(ev.UserMessageDelivered(message_id=mid, invocation_id=invocation_id) for mid in messages)
                )
        except JournalClosed:
            return Outcome(ok=False, detail="interrupted", error_kind="interrupted", invocation_id=invocation_id)
        self.count += 1
        tools = toolbox.tools(names) if toolbox is not None else []
        if ask_user is not None:  # the CLI's own ask_user tool reaches a person (step 1 in the TUI)
            result = self.invoke_gateway(request, tools, self._streamer(invocation_id), ask=ask_user)
        else:
            result = self.invoke_gateway(request, tools, self._streamer(invocation_id))
        self._finish(invocation_id, result)
        return Outcome(
            ok=result.error is None,
            detail=result.error.message if result.error else result.final_message,
            error_kind=result.error.kind.value if result.error else "",
            invocation_id=invocation_id,
        )

    def _summariser(self, where: PromptContext, parent_invocation: str) -> Callable[[SummaryWanted], str]:
        """What makes a section's summary for the invocation ``where`` describes: a session on the oracle's
        model chain with no tools at all, recorded as its own invocation (``kind="summary"``) under
        ``parent_invocation`` and stopped by the same budgets. SummaryFailed when it fails."""

        def make(wanted: SummaryWanted) -> str:
            invocation_id = new_invocation_id(Kind.SUMMARY)
            prompt = summary_prompt(where, wanted)
            request = self._toolless(Kind.SUMMARY, invocation_id, prompt, SUMMARY_SYSTEM, self._budget(where.task))
            self.journal.record(
                ev.InvocationStarted(
                    invocation_id=invocation_id,
                    phase=phase_of(where.step).value,
                    step=where.step,
                    kind=Kind.SUMMARY.value,
                    model=request.models[0],
                    component=where.component,
                    task=where.task,
                    prompt_size=len(prompt) + len(SUMMARY_SYSTEM),
                    sections_sent=(wanted.key,),
                    parent_invocation=parent_invocation,
                    cli_tools=(),
                )
            )
            result = self.invoke_gateway(request, [], self._streamer(invocation_id))
            self._finish(invocation_id, result, discipline=False)
            if result.error is not None:
                raise SummaryFailed(f"{result.error.kind.value}: {result.error.message}")
            return result.final_message

        return make

    def _cli_tools(self, kind: Kind) -> tuple[str, ...]:
        """The CLI's own tools for ``kind``; its URL tool only when ``sandbox.allow_urls`` names a host the
        model may fetch (else every fetch would be refused: no point offering it)."""
        tools = CLI_TOOLS[kind]
        if self.settings.sandbox.allow_urls:
            return tools
        return tuple(t for t in tools if t != URL_TOOL)

    def _budget(self, task: str) -> Callable[[], str] | None:
        """The check the gateway makes after each model call: the figures of the first budget reached."""
        if self.limits is None or self.spending is None:
            return None
        limits, spending = self.limits(task), self.spending
        if not limits:
            return None
        share = self.settings.budget.confirmation_threshold

        def reached() -> str:
            module, spent = spending(task)
            found = first_reached(limits, module, spent, share)
            return f"{found} — stopped inside the invocation" if found else ""

        return reached

    def _instructions(self) -> list[Instructions]:
        if self.project_root is None or not self.settings.copilot.repository_instructions:
            return []
        return repository_instructions(self.project_root)

    def _standards(self) -> str:
        if self.project_root is None:
            return ""
        return render_standards(coding_standards(self.project_root, self.journal.module))

    def _verify_command(self) -> str:
        if self.project_root is None:
            return ""
        try:
            return hooks(self.project_root, self.journal.module).get(VERIFY_TESTS, "")
        except DocumentError:
            return ""

    def _branch(self, component: str) -> str:
        """The branch the model's work lands on: a lane's own, or the module's."""
        lane = self.journal.read(lambda s: s.lanes.get(component)) if component else None
        return lane.branch if lane is not None and lane.branch else f"lopen/{self.journal.module}"

    def _toolless(
        self, kind: Kind, invocation_id: str, prompt: str, system: str, budget: Callable[[], str] | None = None
    ) -> InvocationRequest:
        """The request of a session with no tools at all (the oracle's, a summary's): its model chain, the
        system message replaced, the same time, turn and token caps as every invocation."""
        copilot = self.settings.copilot
        return InvocationRequest(
            models=self.models_for(kind),
            prompt=prompt,
            system_message=system,
            system_mode="replace",
            working_directory=str(self.workdir),
            timeout=copilot.invocation_timeout,
            max_turns=copilot.max_turns_per_invocation,
            max_tokens=copilot.max_tokens_per_invocation,
            budget=budget,
            cli_tools=(),
            traceparent=self.traceparent(invocation_id) if self.traceparent else "",
            conversation_id=invocation_id,
        )

    def invoke_oracle(
        self, prompt: str, system: str, parent_invocation: str, *, scope: str, target: str, instructions: str = ""
    ) -> tuple[str, InvocationResult]:
        """An oracle session: no tools at all, the oracle model chain, recorded as its own invocation
        (``kind="oracle"``) under the invocation whose verify tool asked. Returns (its id, the result)."""
        invocation_id = new_invocation_id(Kind.ORACLE)
        request = self._toolless(Kind.ORACLE, invocation_id, prompt, system)
        parent = self.journal.read(lambda s: s.invocations.get(parent_invocation))
        self.journal.record(
            ev.InvocationStarted(
                invocation_id=invocation_id,
                phase="building",
                step=6 if scope != "module" else 7,
                kind=Kind.ORACLE.value,
                model=request.models[0],
                component=target if scope == "component" else "",
                task=target if scope == "task" else (parent.task if parent else ""),
                prompt_size=len(prompt) + len(system),
                parent_invocation=parent_invocation,
                instructions=tuple(i.label for i in self._instructions()) if instructions else (),
                cli_tools=(),
                prompt=self._keep_prompt(request),
            )
        )
        result = self.invoke_gateway(request, [], self._streamer(invocation_id))
        self._finish(invocation_id, result, discipline=False)
        return invocation_id, result

    def _keep(self, text: str) -> str:
        """Keep ``text`` once, as a blob of the project (``events.blobs``); its key. The blob is stored with
        the event that names it, in that event's transaction (``EventStore.keep_blob``)."""
        return self.journal.store.keep_blob(self.journal.project, text)

    def _keep_prompt(self, request: InvocationRequest) -> dict[str, str]:
        """The exact prompt sent, part by part, each kept once as a blob: part → key."""
        parts = {"system": request.system_message, "guidance": request.guidance, "user": request.prompt}
        return {name: self._keep(text) for name, text in parts.items() if text}

    def _streamer(self, invocation_id: str) -> Callable[[StreamEvent], None]:
        def on_event(event: StreamEvent) -> None:
            if self.watch is not None:
                self.watch(invocation_id, event)
            recorded = self._event_for(invocation_id, event)
            if recorded is not None:
                # the session ended (interrupted), or the lane's claim was lost (its journal aborts the
                # invocation): late events are dropped
                with contextlib.suppress(JournalClosed, Fenced):
                    self.journal.record(recorded, durable=not isinstance(recorded, UNSYNCED))

        return on_event

    def _event_for(self, invocation_id: str, event: StreamEvent) -> ev.Event | None:
        if isinstance(event, UsageReported):
            price = price_of(self.prices, event.model)
            return ev.TokensUsed(
                invocation_id=invocation_id,
                model=event.model,
                input=event.input,
                output=event.output,
                cache_read=event.cache_read,
                cache_write=event.cache_write,
                premium=premium_for_call(
                    event.model, first_of_attempt=event.first_of_attempt, agent_id=event.agent_id, prices=self.prices
                ),
                call_id=event.call_id,
                agent_id=event.agent_id,
                cost=call_cost(price, input=event.input, output=event.output, cache_read=event.cache_read)
                if price
                else 0.0,
                priced=price is not None,
            )
        if isinstance(event, ToolFinished):
            record = event.record
            arguments = record.arguments if isinstance(record.arguments, dict) else {"raw": record.arguments}
            return ev.ToolCalled(
                invocation_id=invocation_id,
                tool=record.name,
                arguments=arguments,
                success=record.success,
                result_summary=record.result[:RESULT_SUMMARY],
                duration=record.duration,
                exit_code=exit_code(record.result) if record.name == "bash" else None,
                result_hash=content_hash(record.result),
                call_id=record.call_id,
                agent_id=record.agent_id,
                result_blob=self._keep(record.result) if len(record.result) > RESULT_SUMMARY else "",
            )
        if isinstance(event, AssistantText):
            return ev.ModelSaid(invocation_id=invocation_id, text=event.text, agent_id=event.agent_id)
        if isinstance(event, AssistantReasoning):
            return ev.ModelReasoned(invocation_id=invocation_id, text=event.text, agent_id=event.agent_id)
        if isinstance(event, ModelFellBack):
            return ev.ModelFellBack(
                invocation_id=invocation_id, from_model=event.from_model, to_model=event.to_model, why=event.why
            )
        if isinstance(event, RetryScheduled):
            return ev.GuardrailTripped(
                invocation_id=invocation_id,
                category="retry",
                level="warn",
                # the CLI does not say how long it waits (it honours Retry-After): no "in 0.0 s"
                detail=f"{event.model}: {event.reason}, retry {event.attempt} by the {event.by}"
                + (f" in {event.delay:.1f} s" if event.delay > 0 else ""),
            )
        if isinstance(event, PermissionDecision):
            return ev.PermissionDecided(
                invocation_id=invocation_id,
                kind=event.kind,
                target=event.target[:500],
                allowed=event.allowed,
                reason=event.reason,
                agent_id=event.agent_id,
            )
        return None

    def _finish(self, invocation_id: str, result: InvocationResult, *, discipline: bool = True) -> None:
        events: list[ev.Event] = []
        if result.context.limit:
            events.append(
                ev.ContextWindowMeasured(
                    invocation_id=invocation_id, used=result.context.used, limit=result.context.limit
                )
            )
        if discipline:
            rules = self.settings.tool_discipline
            for finding in analyze(
                [c for c in result.tool_calls if not c.agent_id],
                rules.max_file_reads,
                rules.max_command_retries,
                working_directory=str(self.workdir),
            ):
                events.append(
                    ev.CorrectiveInstructionIssued(
                        invocation_id=invocation_id, category=finding.category, instruction=finding.instruction
                    )
                )
        error = result.error
        events.append(
            ev.InvocationFinished(
                invocation_id=invocation_id,
                outcome="ok" if error is None else ("interrupted" if error.kind is ErrorKind.INTERRUPTED else "error"),
                error_kind=error.kind.value if error else "",
                duration=result.duration,
            )
        )
        with contextlib.suppress(JournalClosed):
            self.journal.record(*events)
