"""The settings model: every setting Lopen reads, its type, default, allowed range and meaning.

One frozen msgspec Struct per section; the descriptions here are the source of
`docs/configuration.md` (regenerate it with `bin/gen-config-docs`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import msgspec
import xxhash
from msgspec import Meta

ModelName = Annotated[str, Meta(min_length=1)]
Count = Annotated[int, Meta(ge=0)]
Positive = Annotated[int, Meta(ge=1)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
Seconds = Annotated[float, Meta(gt=0)]

DEFAULT_MODEL = "claude-opus-4.6"


def _doc(text: str, *, pattern: str | None = None, allowed: str | None = None) -> Meta:
    """Describe a setting; `pattern` constrains a string and `allowed` words the constraint."""
    return Meta(description=text, pattern=pattern, extra={"allowed": allowed} if allowed else None)


class _Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A settings section: immutable, and unknown keys are an error."""


class Models(_Section):
    requirement_gathering: Annotated[ModelName, _doc("Model for step 1, drafting the specification.")] = DEFAULT_MODEL
    planning: Annotated[ModelName, _doc("Model for steps 2–5: dependencies, components, tasks.")] = DEFAULT_MODEL
    building: Annotated[ModelName, _doc("Model for steps 6–7: implementing the tasks.")] = DEFAULT_MODEL
    research: Annotated[ModelName, _doc("Model for research invocations.")] = DEFAULT_MODEL
    fallback: Annotated[
        tuple[ModelName, ...],
        _doc("Models tried in order when the phase's model is unavailable; empty = fail instead."),
    ] = ("claude-sonnet-4.5", "gpt-5")
    oracle: Annotated[ModelName, _doc("Cheap model for verification sessions (task, component, module checks).")] = (
        "gpt-5-mini"
    )


Money = Annotated[float, Meta(ge=0)]


class Price(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One model's prices: US dollars per million tokens, and Copilot's premium-request multiplier.

    ``input`` is what an input token not read from the provider's cache costs, ``cached_input`` one
    that was; ``premium`` is the premium requests one prompt costs on GitHub Copilot (None = Lopen's
    built-in rule, ``lopen.workflow.models.premium_requests``)."""

    input: Money
    output: Money
    cached_input: Money = 0.0
    premium: Annotated[float, Meta(ge=0)] | None = None


class Budget(_Section):
    token_budget_per_module: Annotated[Count, _doc("Tokens one module may spend; 0 = unlimited.")] = 0
    premium_budget_per_module: Annotated[Count, _doc("Premium requests one module may spend; 0 = unlimited.")] = 0
    money_budget_per_module: Annotated[
        Money, _doc("US dollars one module may spend, priced with budget.prices; 0 = unlimited.")
    ] = 0.0
    token_budget_per_task: Annotated[
        Count, _doc("Tokens one task may spend (its invocations and their oracle checks, across runs); 0 = unlimited.")
    ] = 0
    premium_budget_per_task: Annotated[Count, _doc("Premium requests one task may spend; 0 = unlimited.")] = 0
    money_budget_per_task: Annotated[Money, _doc("US dollars one task may spend; 0 = unlimited.")] = 0.0
    prices: Annotated[
        dict[str, Price],
        _doc(
            "Prices per model, over Lopen's defaults (docs/guardrails.md lists them; they are defaults to check "
            "against your provider's current prices): US dollars per million input, cached-input and output "
            "tokens, and the premium-request multiplier. A model in neither costs 0 and is shown unpriced.",
            allowed='a JSON object: {"model": {"input": 3, "cached_input": 0.3, "output": 15, "premium": 1}}',
        ),
    ] = msgspec.field(default_factory=dict)
    warning_threshold: Annotated[
        Fraction, _doc("Share of a budget at which Lopen warns. Must not exceed confirmation_threshold.")
    ] = 0.8
    confirmation_threshold: Annotated[
        Fraction,
        _doc(
            "Share of a budget at which Lopen stops for confirmation (exit 2 when headless); an invocation "
            "that reaches it is stopped inside, after the model call that crossed it."
        ),
    ] = 0.9


class Workflow(_Section):
    unattended: Annotated[bool, _doc("Run without stopping for human confirmations.")] = False
    max_iterations: Annotated[Positive, _doc("Most loop iterations in one run before Lopen stops.")] = 100
    failure_threshold: Annotated[Positive, _doc("Consecutive failures of one task before Lopen asks a person.")] = 3
    parallelism: Annotated[
        Positive,
        _doc(
            "Components built at once, each on its own branch and worktree, merged when verified (--parallel N); "
            "1 = one after another on the module branch."
        ),
    ] = 2
    lease: Annotated[
        Seconds,
        _doc(
            "Seconds a worker's claim on a component lasts unless renewed (every third of it); when a worker dies, "
            "another takes its component over after this."
        ),
    ] = 60.0


class Session(_Section):
    auto_resume: Annotated[bool, _doc("Resume the module's unfinished session without asking.")] = True
    retention: Annotated[Count, _doc("Finished sessions kept per module by `lopen session prune`.")] = 10


class Git(_Section):
    enabled: Annotated[
        bool,
        _doc("Use git: a branch and a worktree per module, diffs and reverts. Lopen needs it: false is refused."),
    ] = True
    auto_commit: Annotated[bool, _doc("Commit after each completed task (exactly the tree the oracle verified).")] = (
        True
    )
    worktree_dir: Annotated[
        str,
        _doc(
            "Folder (relative to the project) holding the worktree each module is built in, as <folder>/<module>.",
            pattern=r"^(?!(.*/)?\.\.(/|$))(?!docs/requirements(/|$))[^/\s][^\s]*$",
            allowed="a relative path inside the project, without spaces or `..`, not under docs/requirements",
        ),
    ] = ".lopen/worktrees"
    ignore: Annotated[
        tuple[str, ...],
        _doc(
            "Patterns (gitignore syntax) never part of a verified tree or a commit, on top of the project's own "
            "ignore files: tool caches a test run writes."
        ),
    ] = (
        "__pycache__/",
        "*.py[cod]",
        ".pytest_cache/",
        ".mypy_cache/",
        ".ruff_cache/",
        ".hypothesis/",
        ".tox/",
        ".nox/",
        ".coverage",
        "node_modules/",
        ".DS_Store",
    )
    max_file_mb: Annotated[
        Count,
        _doc(
            "Files larger than this many MB (new or changed by the model) stay out of verified trees and commits; "
            "0: no limit."
        ),
    ] = 50
    convention: Annotated[Annotated[str, Meta(min_length=1)], _doc("Commit message convention, e.g. conventional.")] = (
        "conventional"
    )
    remote: Annotated[
        str,
        _doc(
            "A git remote the module's workers share (e.g. origin): each branch Lopen moves is pushed there and what "
            'another worker built is fetched from it. "" = one machine, no remote.',
            pattern=r"^([^\s]+)?$",
            allowed="empty, or the name or URL of a git remote",
        ),
    ] = ""
    pr_remote: Annotated[
        str,
        _doc(
            'The git remote `lopen pr` pushes lopen/<module> to and proposes it on; "" = git.remote when set, '
            "else origin.",
            pattern=r"^([^\s]+)?$",
            allowed="empty, or the name or URL of a git remote",
        ),
    ] = ""


class ToolDiscipline(_Section):
    max_file_reads: Annotated[
        Positive, _doc("Reads of the same file in one invocation before the model is told to stop.")
    ] = 3
    max_command_retries: Annotated[
        Count, _doc("Re-runs of the same failing command before the model is told to change course.")
    ] = 2


class Display(_Section):
    color: Annotated[
        Literal["auto", "always", "never"],
        _doc("Colour output: auto (when the terminal supports it), always or never. NO_COLOR wins."),
    ] = "auto"
    ascii: Annotated[bool, _doc("Use ASCII symbols instead of ✓ ✗ ▶ ○ (automatic when not UTF-8).")] = False
    tui: Annotated[
        bool, _doc("Open the full-screen terminal UI for runs in a terminal; false = plain lines as with --headless.")
    ] = True
    landing: Annotated[bool, _doc("Show the TUI's landing screen (logo and version) before the first screen.")] = True


class Provider(_Section):
    type: Annotated[
        Literal["", "openai", "azure", "anthropic"],
        _doc('Bring-your-own-model provider; "" = GitHub Copilot\'s model routing.'),
    ] = ""
    base_url: Annotated[
        str,
        _doc(
            "Provider endpoint, e.g. http://localhost:11434/v1. Setting it switches every session to it.",
            pattern=r"^(https?://\S+)?$",
            allowed="empty, or an http:// or https:// URL",
        ),
    ] = ""
    api_key: Annotated[str, _doc("Provider API key. Secret: set it with LOPEN_PROVIDER__API_KEY, never in a file.")] = (
        ""
    )
    wire_api: Annotated[
        Literal["completions", "responses"], _doc("Provider API format (responses for GPT-5 series models).")
    ] = "completions"

    @property
    def byok(self) -> bool:
        """True when a provider replaces GitHub's model routing."""
        return bool(self.base_url)


class Copilot(_Section):
    cli_path: Annotated[
        str, _doc('Copilot CLI binary; "" = COPILOT_CLI_PATH, then the one `lopen setup` (or bin/setup) installed.')
    ] = ""
    retry_attempts: Annotated[Count, _doc("Retries of a rate-limited or transient model call.")] = 4
    retry_base_delay: Annotated[Seconds, _doc("First retry delay in seconds (doubles each retry).")] = 1.0
    retry_max_delay: Annotated[Seconds, _doc("Longest retry delay in seconds. Must not be below retry_base_delay.")] = (
        30.0
    )
    invocation_timeout: Annotated[Seconds, _doc("Seconds one invocation may run before it is stopped.")] = 900.0
    max_turns_per_invocation: Annotated[
        Count,
        _doc(
            "Tool calls one invocation may make (a sub-agent's count too) before Lopen stops it cleanly and "
            "counts a failed attempt of its task: a model looping on one command stops here. 0 = no cap."
        ),
    ] = 150
    max_tokens_per_invocation: Annotated[
        Count,
        _doc(
            "Input and output tokens one invocation may use before Lopen stops it cleanly and counts a "
            "failed attempt of its task. 0 = no cap."
        ),
    ] = 0
    builder_prompt: Annotated[
        bool,
        _doc(
            "Run the CLI as a headless builder: per invocation only the CLI tools it needs, no skills, no "
            "co-author trailer, Lopen's guidelines instead of the interactive ones. false = the CLI's own "
            "prompt and every CLI tool."
        ),
    ] = True
    repository_instructions: Annotated[
        bool,
        _doc(
            "Give the model and the oracle the repository's agent instructions (AGENTS.md, CLAUDE.md, "
            ".github/copilot-instructions.md) as the project's conventions, recorded with each prompt."
        ),
    ] = True


class Store(_Section):
    url: Annotated[
        str,
        _doc(
            'Event store; "" = SQLite at .lopen/store.sqlite, sqlite:///<path> = SQLite there (a relative path '
            "is from the project root), postgresql://… = a shared PostgreSQL.",
            pattern=r"^((postgres(ql)?://|sqlite:///)\S+)?$",
            allowed="empty (SQLite under .lopen/), sqlite:///<path>, or a postgresql:// URL",
        ),
    ] = ""


class Project(_Section):
    id: Annotated[
        str,
        _doc(
            'This project\'s id in the event store; "" = the one Lopen recorded in .lopen/project-id when it '
            "first ran here (from the repository's first commit). Set it to share module histories between "
            "clones, or to keep two projects apart on one shared store.",
            pattern=r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$",
            allowed="empty, or letters, digits, '.', '_' and '-' (starting with a letter or digit)",
        ),
    ] = ""


class Context(_Section):
    token_budget: Annotated[
        Positive, _doc("Tokens of documents put into one prompt; lower-priority sections are cut first.")
    ] = 24000
    summaries: Annotated[
        bool,
        _doc(
            "Send a spec section that has to be cut whole as a summary instead, where one fits: made once "
            "per section content by models.oracle (no tools, counted in the budgets), cached under "
            ".lopen/cache/summaries/. false = cut it."
        ),
    ] = True


HostPattern = Annotated[
    str,
    Meta(
        pattern=r"^(\*|(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)$",
    ),
]


NetworkPattern = Annotated[
    str,
    Meta(
        pattern=r"^(\*|(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
        r"|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$",
    ),
]


class Sandbox(_Section):
    mode: Annotated[
        Literal["auto", "bwrap", "landlock", "policy"],
        _doc(
            "How the model is confined. auto = bubblewrap where it works, else Landlock, else the permission "
            "policy alone (with a warning); bwrap or landlock = that kernel sandbox or an error; policy = "
            "no kernel sandbox. The policy (writes only in the worktree and temp, no reads of Lopen's state, "
            "the approved spec or secret files) applies in every mode. `lopen doctor` says which is active."
        ),
    ] = "auto"
    allow_urls: Annotated[
        tuple[HostPattern, ...],
        _doc(
            "Hosts whose URLs the model may fetch, e.g. docs.python.org, *.readthedocs.io (* = any); empty = none.",
            allowed="a list of host names, each optionally starting with *. (or just *)",
        ),
    ] = ()
    allow_network: Annotated[
        tuple[NetworkPattern, ...],
        _doc(
            "Hosts the sandbox's network may reach besides the model provider, through Lopen's proxy (under "
            "bubblewrap, and Landlock ABI 4+; the policy alone does not confine the network), e.g. pypi.org, "
            "files.pythonhosted.org, "
            "registry.npmjs.org. host = ports 443 and 80, host:port = that port; * = any host (never this "
            "machine: a loopback address is reached only when named with its port, e.g. 127.0.0.1:8080). "
            "The provider is always allowed: provider.base_url's host and port, or GitHub Copilot's "
            "endpoints (api.githubcopilot.com, *.githubcopilot.com, api.github.com, github.com, "
            "*.githubusercontent.com). Package registries are not, unless listed here.",
            allowed="a list of host names (optionally starting with *., or just *) or [IPv6] addresses, "
            "each optionally followed by :port",
        ),
    ] = ()


class Otel(_Section):
    """OpenTelemetry export (docs/observability.md). The standard OTEL_* variables win over these keys."""

    endpoint: Annotated[
        str,
        _doc(
            "OTLP/HTTP endpoint (base URL) for Lopen's spans and metrics and the Copilot CLI's, e.g. "
            'http://localhost:4318; "" = export nothing. OTEL_EXPORTER_OTLP_ENDPOINT wins.',
            pattern=r"^(https?://\S+)?$",
            allowed="empty, or an http:// or https:// URL",
        ),
    ] = ""
    protocol: Annotated[
        Literal["http/protobuf", "http/json"],
        _doc(
            "OTLP encoding the Copilot CLI uses (Lopen itself always sends http/protobuf). "
            "OTEL_EXPORTER_OTLP_PROTOCOL wins."
        ),
    ] = "http/protobuf"
    service_name: Annotated[
        Annotated[str, Meta(min_length=1)], _doc("service.name of Lopen's spans and metrics. OTEL_SERVICE_NAME wins.")
    ] = "lopen"
    disabled: Annotated[bool, _doc("Export nothing even when an endpoint is set (like OTEL_SDK_DISABLED=true).")] = (
        False
    )
    capture_content: Annotated[
        bool,
        _doc(
            "Put message content (tool arguments and results, verdict summaries) into spans, redacted. "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT wins."
        ),
    ] = False


ServerName = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")]


class McpServer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One of the user's MCP servers, as the Copilot CLI takes it: a local process spoken to over stdio
    (``command``, ``args``, ``env``, ``cwd``) or a remote one over HTTP (``url``, ``headers``); ``tools``
    names the server's tools the model may call (``*`` = all of them). ``env`` and ``headers`` values
    may name Lopen's environment variables as ``${NAME}``, expanded when the session starts."""

    tools: tuple[Annotated[str, Meta(min_length=1)], ...]
    type: Literal["", "stdio", "local", "http", "sse"] = ""
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str = ""
    url: Annotated[str, Meta(pattern=r"^(https?://\S+)?$")] = ""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: Annotated[int, Meta(ge=0)] = 0  # milliseconds a tool call may take; 0 = the CLI's default

    def __post_init__(self) -> None:
        if self.remote:
            if not self.url:
                raise ValueError("an http or sse server needs a url")
            if self.command or self.args or self.env or self.cwd:
                raise ValueError("an http server takes url and headers, not command, args, env or cwd")
        else:
            if not self.command:
                raise ValueError("a stdio server needs a command (or an http server a url)")
            if self.headers:
                raise ValueError("a stdio server takes command, args, env and cwd, not headers")

    @property
    def remote(self) -> bool:
        """Spoken to over HTTP (or SSE) rather than started as a process."""
        return self.type in ("http", "sse") or (not self.type and bool(self.url))


class Mcp(_Section):
    servers: Annotated[
        dict[ServerName, McpServer],
        _doc(
            "Your MCP servers, given to the model's task and verification sessions (never the oracle's, "
            "the spec's, research's or planning's), as the Copilot CLI takes them: stdio (command, args, env, "
            'cwd) or HTTP (url, headers), each with the tools the model may call ("*" = all). Other tools '
            "are refused. env and headers values are secrets (masked when shown): write ${NAME} to take one "
            "from Lopen's environment. A stdio server runs inside the sandbox; an HTTP server's host and port "
            "are added to its network allowlist. docs/tools.md#your-mcp-servers.",
            allowed='a JSON object: {"name": {"command": "uvx", "args": ["mcp-server-x"], "tools": ["*"]}} '
            'or {"name": {"url": "https://host/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}, '
            '"tools": ["search"]}}',
        ),
    ] = msgspec.field(default_factory=dict)


class Settings(_Section):
    """Every Lopen setting, resolved from flags, env, project and user files, and defaults."""

    models: Models = msgspec.field(default_factory=Models)
    budget: Budget = msgspec.field(default_factory=Budget)
    workflow: Workflow = msgspec.field(default_factory=Workflow)
    session: Session = msgspec.field(default_factory=Session)
    git: Git = msgspec.field(default_factory=Git)
    tool_discipline: ToolDiscipline = msgspec.field(default_factory=ToolDiscipline)
    display: Display = msgspec.field(default_factory=Display)
    provider: Provider = msgspec.field(default_factory=Provider)
    copilot: Copilot = msgspec.field(default_factory=Copilot)
    store: Store = msgspec.field(default_factory=Store)
    context: Context = msgspec.field(default_factory=Context)
    project: Project = msgspec.field(default_factory=Project)
    sandbox: Sandbox = msgspec.field(default_factory=Sandbox)
    otel: Otel = msgspec.field(default_factory=Otel)
    mcp: Mcp = msgspec.field(default_factory=Mcp)

    def public(self) -> dict[str, dict[str, object]]:
        """The settings as plain data with every secret masked: safe to show, log or store."""
        data = msgspec.to_builtins(self)
        for key, mask in SECRETS.items():
            section, name = key.split(".")
            data[section][name] = mask(data[section][name])
        return data

    def digest(self) -> str:
        """xxh3-64 hex digest of the settings with secrets masked (for SessionStarted events)."""
        return xxhash.xxh3_64_hexdigest(msgspec.json.encode(self.public()))


def mask_secret(value: str) -> str:
    """`sk-...1234` for long secrets, `***` for short ones, "" stays ""."""
    if not value:
        return ""
    return f"{value[:3]}...{value[-4:]}" if len(value) >= 16 else "***"


def mask_url_password(url: str) -> str:
    """Hide the password of a URL such as `postgresql://user:pw@host/db`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


_REFERENCE = re.compile(r"(?:[A-Za-z]+ )?\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def mask_mcp_servers(servers: Any) -> Any:
    """MCP servers with their ``env`` and ``headers`` values masked (a bare ``${NAME}`` reference, or
    ``Bearer ${NAME}``, is shown: it holds no secret); anything but a table of servers is ``***``."""
    if not isinstance(servers, dict):
        return "***"
    masked: dict[str, Any] = {}
    for name, server in servers.items():
        if isinstance(server, McpServer):
            server = msgspec.to_builtins(server)
        if not isinstance(server, dict):
            masked[name] = "***"
            continue
        masked[name] = dict(server)
        for table in ("env", "headers"):
            values = server.get(table)
            if isinstance(values, dict):
                masked[name][table] = {
                    key: value if isinstance(value, str) and _REFERENCE.fullmatch(value) else mask_secret(str(value))
                    for key, value in values.items()
                }
            elif table in server:
                masked[name][table] = "***"
    return masked


# Settings whose values must never be shown, logged or stored as they are, with their mask.
SECRETS: dict[str, Callable[[Any], Any]] = {
    "provider.api_key": mask_secret,
    "store.url": mask_url_password,
    "otel.endpoint": mask_url_password,
    "mcp.servers": mask_mcp_servers,
}
