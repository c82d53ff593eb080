"""The agent's side of Wake Ledger: the ``wakeledger`` CLI, the MCP server and
the hooks, all clients of the REST API.

Nothing here imports Django, ``api`` or ``scheduling``: it runs in whatever
environment an agent has. The only server code it may use is the pure domain
(``ledger.domain.failures``, ``ledger.domain.resets``), which imports no Django.
"""
