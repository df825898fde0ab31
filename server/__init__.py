"""TreeRAG as a service: ``python main.py serve`` (HTTP JSON API, server-sent events, the web page,
MCP over streamable HTTP) and ``python main.py mcp`` (MCP over stdio).

One process holds the index and its models (``state.IndexHolder``); the routes (``routes``), the
event stream (``sse``), the MCP tools (``mcp_tools``) and the page (``static/``) all ask the same
operations (``service``), so an answer is the same whichever door it is asked through.
"""
