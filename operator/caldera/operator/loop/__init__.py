"""The session loop: when a session runs (on news, debounced, at least every period), where it
runs (a process of its own), and handing its decisions to the writers."""
