"""The guards that protect what the record says (issue "Tests that catch what matters"): the reviewer's
verdict as read, the fold's refusal of a commit on a stale tip and of a claim under a live lease (pinned
at the lease's last second), and secrets kept out of a real SQLite store — each test written to fail on a
mutation that every other test let through.

``{"passed": "true"}`` and a command killed by a signal are covered in tests/test_rubric.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_events_store import PROJECT
from test_fold import components, fold, move, tasks
from test_journal import stored_fold

from events import catalogue as ev
from events.journal import Contradiction, Journal
from events.recorded import module_stream
from events.redaction import REDACTED, forget_secrets, redact_text, register_secrets
from events.store import EventStore
from lopen.workflow.oracle import parse_verdict

NOW = 1_000_000.0
UNTIL = NOW + 60
A, B = "host:1/1", "host:2/1"
BILLING = module_stream(PROJECT, "billing")  # not "auth": that word alone would trip the secret pre-check


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    s = EventStore.open(tmp_path)
    yield s
    s.close()


def stored_bytes(root: Path) -> bytes:
    """Everything in the SQLite files of the store at ``root`` (the WAL too)."""
    return b"".join(p.read_bytes() for p in sorted((root / ".lopen").glob("store.sqlite*")))


# -- 1. the reviewer's verdict ---------------------------------------------------------------------------


def test_a_boolean_confidence_is_not_a_verdict() -> None:
    """``true`` is a JSON boolean, not a number: a pass carrying it is unreadable, never a pass."""
    answer = '{"passed": true, "confidence": true, "summary": "looks fine"}'
    read = parse_verdict(answer)
    assert not read.passed and read.reviewer_failed and read.raw == answer
    # with a readable verdict further on, that one is taken instead
    two = (
        '```json\n{"passed": true, "confidence": true}\n```\nOn reflection:\n'
        '```json\n{"passed": false, "confidence": 0.4, "summary": "S-02 is untested"}\n```'
    )
    read = parse_verdict(two)
    assert not read.passed and not read.reviewer_failed
    assert (read.confidence, read.summary) == (0.4, "S-02 is untested")


@pytest.mark.parametrize(
    ("given", "read"),
    [("1.7", 1.0), ("-0.2", 0.0), ('"85%"', 0.85), ('"170%"', 1.0), ('"-20%"', 0.0), ('"1.7"', 1.0), ("1", 1.0)],
)
def test_confidence_is_clamped_into_zero_to_one(given: str, read: float) -> None:
    verdict = parse_verdict(f'{{"passed": true, "confidence": {given}, "summary": "ok"}}')
    assert verdict.passed and not verdict.reviewer_failed
    assert verdict.confidence == pytest.approx(read)
    assert 0.0 <= verdict.confidence <= 1.0


# -- 2. the fold's checks: a commit on a stale tip, leases ------------------------------------------------


def two_complete_tasks() -> list[ev.Event]:
    return [
        ev.BranchEnsured(branch="lopen/auth", base="base0", worktree="/w"),
        components("Core"),
        tasks("Core", 1, 2),
        *move("core/1", "pending", "in-progress", "complete", tree="tree1"),
        *move("core/2", "pending", "in-progress", "complete", tree="tree2"),
    ]


def test_a_commit_whose_parent_is_not_the_tip_is_refused_by_the_fold() -> None:
    state = fold(*two_complete_tasks(), ev.CommitRecorded(sha="c1", task_id="core/1", tree="tree1", parent="base0"))
    late = ev.CommitRecorded(sha="c2", task_id="core/2", tree="tree2", parent="base0")  # written on the old tip
    problem = state.apply(late, 9)
    assert problem is not None and "another commit came first" in problem
    assert state.tip == "c1" and state.tasks["core/2"].commit == ""
    assert [t.id for t in state.owed_commits()] == ["core/2"]  # still owed: it is committed again on c1
    assert state.apply(ev.CommitRecorded(sha="c2", task_id="core/2", tree="tree2", parent="c1")) is None


def test_a_commit_on_a_stale_tip_is_refused_by_the_journal_and_nothing_is_stored(store: EventStore) -> None:
    journal = Journal(store, PROJECT, "auth")
    journal.record(*two_complete_tasks())
    journal.record(ev.CommitRecorded(sha="c1", task_id="core/1", tree="tree1", parent="base0"))
    version = store.version(journal.stream)
    with pytest.raises(Contradiction, match="another commit came first"):
        journal.record(ev.CommitRecorded(sha="c2", task_id="core/2", tree="tree2", parent="base0"))
    assert store.version(journal.stream) == version
    again = stored_fold(store)
    assert again.tip == "c1" and again.tasks["core/2"].commit == "" and not again.problems
    assert journal.read(lambda s: s.tip) == "c1"


def claimed(worker: str = A) -> list[ev.Event]:
    return [
        components("Core"),
        tasks("Core", 1),
        ev.ComponentClaimed(component="core", worker=worker, lease_until=UNTIL, at=NOW),
    ]


def test_a_lease_is_live_strictly_before_its_end_and_not_at_or_after_it() -> None:
    state = fold(*claimed())
    live = state.live_claim("core", UNTIL - 1)
    assert live is not None and live.worker == A
    assert state.live_claim("core", UNTIL - 0.001) is not None
    assert state.live_claim("core", UNTIL) is None
    assert state.live_claim("core", UNTIL + 1) is None


@pytest.mark.parametrize(("at", "refused"), [(UNTIL - 1, True), (UNTIL, False), (UNTIL + 1, False)])
def test_another_workers_claim_is_refused_under_a_live_lease_and_taken_once_it_lapsed(
    store: EventStore, at: float, refused: bool
) -> None:
    journal = Journal(store, PROJECT, "auth")
    journal.record(*claimed(A))
    version = store.version(journal.stream)
    second = ev.ComponentClaimed(component="core", worker=B, lease_until=at + 60, at=at)
    assert (fold(*claimed(A)).check(second) is not None) is refused
    if refused:
        with pytest.raises(Contradiction, match="claimed by host:1/1"):
            journal.record(second)
        assert store.version(journal.stream) == version
        assert stored_fold(store).claims["core"].worker == A
    else:
        journal.record(second)
        assert store.version(journal.stream) == version + 1
        assert stored_fold(store).claims["core"].worker == B


# -- 3. secrets never reach the store; ordinary code does, unchanged ---------------------------------------

BASIC = "dXNlcjpwYXNz"  # base64 of user:pass
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AKIA + 16 upper-case alphanumerics
KNOWN = "zq7Xw3vLmP9rT2"  # shaped like nothing: found only because it is registered


def read_back(store: EventStore, root: Path, *events: ev.Event) -> tuple[list[ev.Event], bytes]:
    store.append(BILLING, list(events))
    stored = [r.event for r in store.read_stream(BILLING)]
    store.close()
    return stored, stored_bytes(root)


@pytest.mark.parametrize(
    ("secret", "result"),
    [
        (BASIC, "> GET / HTTP/1.1 > Authorization: Basic {} < HTTP/1.1 200 OK"),  # curl -v, one line
        (AWS_KEY, "configured id {} for region eu-west-1"),
        (KNOWN, "the value is {}"),  # no hint word near it: only its registration finds it
    ],
    ids=["basic-credential", "aws-key-id", "registered-secret"],
)
def test_a_secret_in_a_tool_result_never_reaches_the_store(
    store: EventStore, tmp_path: Path, secret: str, result: str
) -> None:
    register_secrets([KNOWN])
    try:
        call = ev.ToolCalled(tool="bash", arguments={"command": "sh run.sh"}, result_summary=result.format(secret))
        stored, raw = read_back(store, tmp_path, call)
    finally:
        forget_secrets()
    assert stored[0].result_summary == result.format(REDACTED)
    assert secret.encode() not in raw
    assert result.format(REDACTED).encode() in raw


CALLS = "def check_password(token):\n    return verify(token, stored_password) and token != ''\n"
ASSIGNS = "def check_password(token):\n    password = hash_password(token)\n    return password == stored\n"


def test_code_that_names_a_password_or_a_token_is_stored_unchanged(store: EventStore, tmp_path: Path) -> None:
    stored, raw = read_back(
        store, tmp_path, ev.ToolCalled(tool="view", arguments={"path": "auth.py"}, result_summary=CALLS)
    )
    assert stored[0].result_summary == CALLS
    assert REDACTED.encode() not in raw


AUTH_CODE = (
    "import secrets\n\n\n"
    "class Users:\n"
    "    def register(self, username: str, password: str) -> None:\n"
    "        self.hashes[username] = hash_password(password)\n\n"
    "    def issue(self, secret_key: str = DEFAULT_SECRET) -> str:\n"
    "        token = secrets.token_urlsafe(32)\n"
    "        api_key = os.environ['API_KEY']\n"
    '        headers = {"Authorization": f"Bearer {token}"}\n'
    "        return token\n"
)


@pytest.mark.parametrize("code", [ASSIGNS, AUTH_CODE], ids=["assigns", "auth-module"])
def test_code_that_assigns_a_password_or_a_token_is_stored_unchanged(
    store: EventStore, tmp_path: Path, code: str
) -> None:
    """Issue 22: ``password = hash_password(token)`` was stored as ``password = [REDACTED]``, a
    ``password: str`` parameter as ``password: [REDACTED]``: an identifier, a type hint or a call is
    never a secret, so an auth module's code, edits and views are kept byte for byte."""
    edit = ev.ToolCalled(tool="edit", arguments={"path": "auth.py", "old_str": code, "new_str": code + "\n"})
    view = ev.ToolCalled(tool="view", arguments={"path": "auth.py"}, result_summary=code)
    stored, raw = read_back(store, tmp_path, edit, view)
    assert stored[0].arguments["old_str"] == code and stored[0].arguments["new_str"] == code + "\n"
    assert stored[1].result_summary == code
    assert REDACTED.encode() not in raw


PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize(
    ("secret", "text"),
    [
        (PEM, "cat > id_ed25519 <<EOF\n{}\nEOF"),
        (JWT, "curl -H 'X-Session: {}' localhost"),
        ("hunter2hunter2", 'DATABASE_URL="x"\nDB_PASSWORD={}\n'),  # an .env line
        ("Zx9!qwerty", "db_password = '{}'"),  # a string literal with a digit or a symbol
        ("a8f3k29dk3ls92kd", "access_token: {}"),  # an unquoted value that looks random
        ("xoxb-1234567890-abcdefghij", "SLACK={}"),
        ("ASIAIOSFODNN7EXAMPLE", "temporary id {} for the session"),
    ],
    ids=["pem-block", "jwt", "env-line", "literal", "random-value", "slack", "aws-session-id"],
)
def test_a_secret_the_model_writes_is_redacted_and_the_rest_kept(
    store: EventStore, tmp_path: Path, secret: str, text: str
) -> None:
    call = ev.ToolCalled(tool="bash", arguments={"command": text.format(secret)})
    stored, raw = read_back(store, tmp_path, call)
    assert stored[0].arguments["command"] == text.format(REDACTED)
    assert secret.encode() not in raw


@pytest.mark.parametrize(
    "prose",
    [
        "Bearer authentication is required; Basic authentication too",
        'token_type = "bearer"; TOKEN_HEADER = "Authorization"',
        "token = request.headers['Authorization']; api_key = os.environ['API_KEY']",
        "password = generate_password_hash(password); secret_key: str = Field(default=...)",
        "export TOKEN=$GITHUB_TOKEN; PASSWORD=$(cat pw.txt)",
    ],
)
def test_words_names_and_lookups_are_not_secrets(prose: str) -> None:
    assert redact_text(prose) == prose


def test_a_token_in_a_commit_message_is_redacted_though_the_sha_before_it_is_exempt(
    store: EventStore, tmp_path: Path
) -> None:
    """``sha`` (exempt: Lopen's own structural data) comes before ``message`` among the event's fields:
    skipping it must not end the walk over the fields."""
    token = "ghp_" + "a1B2" * 9  # ghp_ and 36 alphanumerics
    commit = ev.CommitRecorded(sha="c0ffee1", message=f"core/1: read {token} from the config", task_id="core/1")
    assert "sha" in ev.CommitRecorded.redaction_exempt
    assert ev.CommitRecorded.__struct_fields__.index("sha") < ev.CommitRecorded.__struct_fields__.index("message")
    stored, raw = read_back(store, tmp_path, commit)
    assert (stored[0].sha, stored[0].message) == ("c0ffee1", f"core/1: read {REDACTED} from the config")
    assert token.encode() not in raw


R = REDACTED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {R}"),  # base64 of user:pass
        ("Authorization: Basic dXNlcjpwYXNzMQ", f"Authorization: Basic {R}"),  # user:pass1, its padding left out
        ("Authorization: Basic dXNlcjpwd2Q", f"Authorization: Basic {R}"),  # user:pwd, one '=' left out
        ("Basic Zm9vYmFyYmF6 is base64 of foobarbaz", "Basic Zm9vYmFyYmF6 is base64 of foobarbaz"),  # no colon
        ("Basic dXNl.cjpwYXNz", "Basic dXNl.cjpwYXNz"),  # not base64 at all
        ("Bearer Authentication", "Bearer Authentication"),  # a word, capitalised
        ("API_KEY=abcd", f"API_KEY={R}"),  # an environment line: four characters are a value
        ("API_KEY=abc", "API_KEY=abc"),  # three are not
        ('password = "<your-password-1>"', 'password = "<your-password-1>"'),  # placeholders
        ("password = '{vault_pw_1}'", "password = '{vault_pw_1}'"),
        ("password = '%(db_pw_1)s'", "password = '%(db_pw_1)s'"),
        ("access_token: a8f3k29dk3ls", f"access_token: {R}"),  # twelve random characters
        ("access_token: a8f3k29dk3l", "access_token: a8f3k29dk3l"),  # eleven: too short to tell
        ("access_token: a8f3k29dk3ls92kd.", f"access_token: {R}"),  # the sentence's full stop is not a lookup
        ("token: app.config.key123", "token: app.config.key123"),  # an attribute
        ("token: settings2024.X", "token: settings2024.X"),  # an attribute, however short
        ("token: hash(pw1234567)", "token: hash(pw1234567)"),  # a call
        ("token: user_token_2024", "token: user_token_2024"),  # a snake_case name
    ],
)
def test_the_boundaries_of_what_is_a_secret(text: str, expected: str) -> None:
    assert redact_text(text) == expected


_NAMES = st.sampled_from(["token", "API_KEY", "db_password", "passwd", "access_token_value", "secret", "Key", "tok"])
_GLUE = st.sampled_from(["=", ": ", " = ", '": "', "'='", " is ", " ", "\n", "=$", ":"])
_VALUES = st.sampled_from(["a8f3k29dk3ls92kd", "'Zx9!qwerty'", '"hunter2x9"', "refused", "abcd", "user_token_2024"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_NAMES, _GLUE, _VALUES), min_size=1, max_size=6), st.sampled_from([" ", "\n", "; "]))
def test_the_quick_test_before_the_assignment_rule_never_skips_an_assignment(
    parts: list[tuple[str, str, str]], sep: str
) -> None:
    """The assignment rule runs only on texts where a secret-like name stands right before an ``=``/``:``
    (``_ASSIGNMENT_HINT``: a prompt that only mentions a token skips its costly scan); on any text the result
    is what the rule itself gives."""
    from events.redaction import _ASSIGNMENT, _assignment

    text = sep.join(f"{name}{glue}{value}" for name, glue, value in parts)
    assert redact_text(text) == _ASSIGNMENT.sub(_assignment, text)
