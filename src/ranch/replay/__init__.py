"""Routing replay and evals: re-run a recorded team turn against a changed team (docs/replay.md).

A team task already holds its turn's route (the trail) and each member's reply (one artifact per
hop); `recording` reads them back, `player` runs the turn again on another config (each unchanged
member's recorded answer given back in place of calling it, or every member called), `compare`
puts the two routes side by side, and `suite` and `evaluate` turn recorded turns and plain inputs
with expected route properties into a regression suite with a pass/fail table.
"""
