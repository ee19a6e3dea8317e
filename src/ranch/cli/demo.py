"""The built-in demo: a helpdesk team of rules agents; no API key, no network.

A request about papers goes user -> triage -> researcher -> triage -> user;
a writing request takes the same shape through the writer.
"""

from __future__ import annotations

from ranch.config import RanchConfig, parse_config

DEMO_TEAM = "helpdesk"
DEMO_PROMPT = "find papers on quantum error correction"

DEMO_YAML = r"""
agents:
  - id: triage
    name: Triage
    description: Reads each request and hands it to the right specialist
    kind: rules
    skills:
      - {id: triage, name: triage, description: Sorts requests, tags: [triage]}
    rules:
      - match: "^Research notes|^Draft"
        reply: "Here is what the team prepared. {text}"
        route: user
        reason: specialist finished
      - match: "(?i)(?P<topic>.*\\b(papers?|research|study|studies|sources)\\b.*)"
        reply: "Routing to the researcher: {topic}"
        route: researcher
        reason: needs research
      - match: "(?i)(?P<topic>.*\\b(write|draft|email|note|poem)\\b.*)"
        reply: "Routing to the writer: {topic}"
        route: writer
        reason: needs writing
      - reply: "I route research and writing requests. Try: 'find papers on ...' or 'write a note about ...'."
        route: user
        reason: nothing to route
  - id: researcher
    name: Researcher
    description: Finds sources and summarises them
    kind: rules
    skills:
      - id: research
        name: research papers       # `ranch agents --skill paper` finds it (README)
        description: Finds and summarises sources
        tags: [search, summarize]
    rules:
      - match: "researcher: (?P<topic>.+)$"
        reply: "Research notes on '{topic}': 1) a survey, 2) a recent preprint, 3) a textbook chapter."
        route: sender
        reason: findings ready
  - id: writer
    name: Writer
    description: Drafts short texts
    kind: rules
    skills:
      - {id: write, name: write, description: Drafts short texts, tags: [write]}
    rules:
      - match: "writer: (?P<topic>.+)$"
        reply: "Draft: a short text for '{topic}', ready for review."
        route: sender
        reason: draft ready
  - id: echo
    name: Echo
    description: Replies with the text it got
    kind: echo
teams:
  - id: helpdesk
    name: Helpdesk
    description: Answers questions with research and writing
    members: [triage, researcher, writer]
    default_agent: triage
    max_hops: 10
"""


def demo_config() -> RanchConfig:
    return parse_config(DEMO_YAML, source="<built-in demo>")
