"""The application: composition of a run (the store, the journal, the worktree, the gateway and the
actors), step 1's drafting, the demo, and how a run stops on Ctrl+C. Above the actors, below the
faces (CLI, TUI, MCP): ``events`` ← domain ← ``actors`` ← ``lopen.app`` ← ``lopen.cli``."""
