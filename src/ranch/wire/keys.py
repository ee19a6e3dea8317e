"""ranch's own metadata keys on A2A messages, parts, tasks and artifacts, in one place.

They are part of what agents and clients read (docs/routing.md, docs/api.md, docs/llm.md),
so they are stable names.
"""

from __future__ import annotations

CONTEXT_PART = "ranch.context"
"""Part metadata flag on the context part the Router (or a room) puts before the content."""
HOP = "ranch.hop"
"""Status messages and artifacts of a team turn: {agent, sender, recipient, reason, hop, ms}."""
TEAM = "ranch.team"
"""A room message a team's member wrote during the team's turn: the team's id."""
MESSAGE_TYPE = "ranch.message_type"
"""A status message an agent reports while working: `tool_call`, `tool_result` or `thought`."""
MESSAGE = "ranch.message"
"""An A2A message made from a room message: {id, cursor, type, sender, room}."""
EXECUTION = "ranch.execution"
"""A room execution served as a task: {status, agent, turns, reason} (docs/api.md)."""
DONE = "ranch.done"
"""`true` on an agent's reply in a room ends its execution (COMPLETED) instead of leaving it ready."""
CHAIN = "ranch.chain"
"""How many agent messages in a row led to this room message (rooms stop waking agents at 10)."""
HANDOFF = "ranch.handoff"
"""A room message handing work over, or handing its result back: {parent, child, agent, reason, status?}."""
APPROVAL = "ranch.approval"
"""Status-message metadata of a team turn waiting for its caller's approval (member, reason, text)."""
