"""The agent identity the loop's tests give it (a trial passes the harness's version)."""

from receipts.agentclis import AgentIdentity

HARNESS_LOOP = AgentIdentity.harness_loop("0.1.0")
