"""The 7-step workflow: its table of steps, prompts, Lopen's tools and the oracle."""
