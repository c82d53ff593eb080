"""MCP over streamable HTTP at ``/mcp``: the same tools as ``wakeledger mcp``
(``wakeledger_agent.mcp_tools``, ``mcp_calls``), served by the product."""
