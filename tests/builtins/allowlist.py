"""The shell allow list the built-in tool tests use, in this process and on their worker."""

SHELL_COMMANDS = [
    {"command": "echo", "arguments": [r"[\w .,-]*"], "max_arguments": 5},
    {"command": "seq", "arguments": [r"\d+"], "max_arguments": 2},
    {"command": "env", "arguments": []},
    {"command": "sleep", "arguments": [r"\d+(\.\d+)?"], "max_arguments": 1},
    {"command": "cat", "arguments": [r"[\w][\w.-]*"], "max_arguments": 3},
]
