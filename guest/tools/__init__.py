"""The agent's tools: OpenCode's names and argument shapes behind a workspace jail.

Every path a tool touches goes through `jail`; every call goes through `registry`,
which parses the model's JSON, validates it, asks `permissions`, and returns a
bounded `result.ToolResult`. Nothing here imports host/ or harness/.
"""
