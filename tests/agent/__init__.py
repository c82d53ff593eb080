"""The agent's side (wakeledger_agent/): the package's boundaries, Claude
Code hooks, supervise, the MCP server."""
