"""Scheduling actions, run in the order the policy lists them: one module per action."""
