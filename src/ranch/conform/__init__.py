"""The client-routing conformance kit: does an A2A agent speak the extension as the spec says?

`ranch conform URL` (ranch.cli.conform) reads the agent's card, sends it the scenarios of
`scenarios.SCENARIOS` over A2A 1.0 (`probe.Agent`: JSON-RPC, else HTTP+JSON) and judges each answer
with the same reader and schema ranch routes with. The scenarios and their texts are in
docs/extension/client-routing-v1.md, "Conformance", so an implementer can run them by hand too.
"""

from ranch.conform.scenarios import Outcome, Report, run

__all__ = ["Outcome", "Report", "run"]
