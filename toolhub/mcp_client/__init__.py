"""Remote MCP servers as governed tool groups: their tools are pinned, then called through the pipeline."""
