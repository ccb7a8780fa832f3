"""The TUI's screens: the run (``MainScreen``), the landing screen, the module picker, step 1 as a
conversation, and the gallery."""
