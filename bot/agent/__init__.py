"""The agent core: the tool loop, the history window and the per-channel conversation."""
