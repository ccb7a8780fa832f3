"""Events reach the screen from a real SQLite store — through the bus in-process, by polling from
elsewhere — and the feed never blocks or drops an event."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import msgspec

from events import catalogue as ev
from events.recorded import Recorded
from events.store import EventStore
from lopen.copilot import results as stream
from lopen.tui.app import LopenApp
from lopen.tui.feed import STREAM_LIMIT, Feed
from lopen.tui.state import ScreenState
from lopen.tui.widgets.plan_tree import PlanTree
from lopen.tui.widgets.tool_call import ToolCallView
from lopen.tui.widgets.topbar import TopBar

from .conftest import MODULE, OPTIONS, PROJECT, SESSION, plan_events, settle, stream_id


def tree_text(app: LopenApp) -> str:
    tree = app.screen.query_one(PlanTree)

    def walk(node) -> list[str]:
        return [str(node.label), *[line for child in node.children for line in walk(child)]]

    return "\n".join(walk(tree.root))


async def test_events_appended_to_a_real_store_are_rendered(store: EventStore) -> None:
    store.append(stream_id(), plan_events()[:2])
    app = LopenApp(OPTIONS).for_watch(store, PROJECT, MODULE, poll=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "no components yet" in tree_text(app)

        appender = threading.Thread(
            target=lambda: store.append(
                stream_id(),
                [
                    *plan_events()[2:],
                    ev.TaskStatusChanged(
                        session_id=SESSION, task_id="core/1", from_state="pending", to_state="in-progress"
                    ),
                    ev.ToolCalled(session_id=SESSION, tool="bash", arguments={"command": "pytest -q"}, duration=1.5),
                ],
            )
        )
        appender.start()  # another thread appends, as a run does: the bus hands the events over
        appender.join()
        await settle(pilot, lambda: bool(app.screen.query(ToolCallView)))
        assert "Normalize text" in tree_text(app) and "core" in tree_text(app)
        (line,) = app.screen.query(ToolCallView)
        assert line.entry.args == "pytest -q" and line.entry.status == "ok"
        assert app.screen.query_one(TopBar).data.step == 6


async def test_a_watcher_polls_a_store_another_process_writes(tmp_path: Path) -> None:
    with EventStore.open(tmp_path) as writer, EventStore.open(tmp_path) as reader:
        writer.append(stream_id(), plan_events()[:1])
        app = LopenApp(OPTIONS).for_watch(reader, PROJECT, MODULE, SESSION, poll=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert app.state is not None and app.state.version == 1
            assert app.feed is not None and app.feed._subscription is None  # no bus: polling only
            writer.append(stream_id(), plan_events()[1:])  # another store object, as another process
            app.feed.poll()  # what the timer runs every POLL_SECONDS, in a worker thread
            await settle(pilot, lambda: "Normalize text" in tree_text(app))
            assert app.state.version == len(plan_events())


async def test_a_busy_run_is_drawn_a_few_frames_a_second_and_its_last_events_are_drawn(store: EventStore) -> None:
    """Frames are what a busy run costs the TUI's process: events arriving faster than DRAW_SECONDS wait
    in the feed for the next frame — none is lost, the last ones too."""
    import asyncio
    import time

    from lopen.tui.app import DRAW_SECONDS

    store.append(stream_id(), plan_events())
    app = LopenApp(OPTIONS).for_watch(store, PROJECT, MODULE, poll=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        frames: list[float] = []
        draw = app._draw_feed

        def counted() -> None:
            frames.append(time.monotonic())
            draw()

        app._draw_feed = counted  # type: ignore[method-assign]
        last = len(plan_events())
        for n in range(40):  # one append at a time, as a run appends, with the app running between them
            store.append(stream_id(), [ev.ProgressReported(session_id=SESSION, progress=f"step {n}")])
            last += 1
            await asyncio.sleep(0)  # the app's loop runs between appends (a yield, not a wait)
        await settle(pilot, lambda: app.state is not None and app.state.version == last)
        assert 1 <= len(frames) < 40
        gaps = [b - a for a, b in itertools.pairwise(frames)]
        assert all(gap >= DRAW_SECONDS * 0.99 for gap in gaps), gaps


def test_many_appends_wake_the_app_once_and_none_is_lost(store: EventStore) -> None:
    wakes = []
    feed = Feed(store, PROJECT, MODULE, notify=lambda: wakes.append(1))
    feed.attach(store.last_seq())

    def append_many() -> None:
        for n in range(200):
            store.append(stream_id(), [ev.ProgressReported(session_id=SESSION, progress=f"step {n}")])

    threads = [threading.Thread(target=append_many) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wakes) == 1  # the app was told once; everything waits in the intake
    state = ScreenState(PROJECT, MODULE)
    folded = feed.drain(state)
    assert len(folded) == 600 and state.version == 600
    feed.on_recorded(Recorded(10_000, stream_id(), 601, ev.ProgressReported(progress="x")))
    assert len(wakes) == 2  # the next arrival after a drain wakes it again


def test_a_gap_in_versions_is_filled_from_the_store(store: EventStore) -> None:
    store.append(stream_id(), plan_events())
    feed = Feed(store, PROJECT, MODULE)
    last = list(store.read_stream(stream_id()))[-1]
    feed.on_recorded(last)  # only the last event arrives (a subscriber that missed the others)
    state = ScreenState(PROJECT, MODULE)
    feed.drain(state)
    assert state.version == len(plan_events())
    assert [t.id for t in state.fold.ordered_tasks()] == ["core/1", "core/2"]


def test_other_modules_are_ignored_and_usage_deltas_are_left_to_events(store: EventStore) -> None:
    feed = Feed(store, PROJECT, MODULE)
    other = ev.ProgressReported(progress="elsewhere")
    feed.on_recorded(Recorded(1, "module:p0test/other", 1, msgspec.structs.replace(other, module="other")))
    feed.on_stream(stream.UsageReported(model="m", input=1, output=1, cache_read=0, cache_write=0))
    assert feed.take() == []


def test_narrative_floods_are_merged_past_the_limit_but_tool_calls_never(store: EventStore) -> None:
    feed = Feed(store, PROJECT, MODULE)
    for n in range(STREAM_LIMIT + 50):
        feed.on_stream(stream.AssistantText(text=f"t{n}"))
    feed.on_stream(stream.ToolStarted(call_id="c", name="bash", arguments={}))
    items = feed.take()
    assert len(items) == STREAM_LIMIT + 1
    assert items[-2].text.endswith(f"t{STREAM_LIMIT + 49}")
    assert isinstance(items[-1], stream.ToolStarted)


async def test_parallel_work_shows_each_components_worker_lease_and_branch(store: EventStore) -> None:
    """Issue 14: the TUI shows components side by side with their worker, lease and branch."""
    store.append(stream_id(), plan_events())
    app = LopenApp(OPTIONS).for_watch(store, PROJECT, MODULE, poll=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert "lease" not in tree_text(app)  # built on the module branch by the run: nothing to say
        until = 1_800_000_000.0  # 2027-01-15T08:00:00Z
        store.append(
            stream_id(),
            [
                ev.ComponentClaimed(session_id=SESSION, component="core", worker="vm:947/2", lease_until=until),
                ev.BranchEnsured(session_id=SESSION, branch="lopen/slug--core", base="a" * 40, component="core"),
            ],
        )
        await settle(pilot, lambda: "vm:947/2" in tree_text(app))
        assert "core  0/2  · vm:947/2, lease to 08:00:00Z  · lopen/slug--core" in tree_text(app)
        store.append(
            stream_id(), [ev.ComponentReleased(session_id=SESSION, component="core", worker="vm:947/2", reason="x")]
        )
        await settle(pilot, lambda: "vm:947/2" not in tree_text(app))
        assert "lopen/slug--core" in tree_text(app)


async def test_the_plan_tree_shows_the_lines_each_task_commit_changed_and_the_component_s_sum(
    store: EventStore,
) -> None:
    """P2: beside a committed task, what its commit changed; beside its component, its tasks' sum."""
    commits = [
        ev.BranchEnsured(session_id=SESSION, branch="lopen/slugify", base="b" * 40, worktree="/w"),
        *(
            ev.TaskStatusChanged(session_id=SESSION, task_id="core/1", from_state=a, to_state=b, tree="t" * 40)
            for a, b in (("pending", "in-progress"), ("in-progress", "complete"))
        ),
        ev.CommitRecorded(
            session_id=SESSION, sha="c" * 40, task_id="core/1", tree="t" * 40, parent="b" * 40,
            branch="lopen/slugify", added=7, removed=1, files=2,
        ),
    ]  # fmt: skip
    store.append(stream_id(), [*plan_events(), *commits])
    app = LopenApp(OPTIONS).for_watch(store, PROJECT, MODULE, poll=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: "Normalize text" in tree_text(app))
        lines = tree_text(app).splitlines()
        (task,) = [line for line in lines if "Normalize text" in line]
        (component,) = [line for line in lines if "core" in line and "1/2" in line]
        assert task.endswith("+7 −1") and "+7 −1" in component
        assert "+" not in next(line for line in lines if "Join words" in line)  # not committed: nothing said
