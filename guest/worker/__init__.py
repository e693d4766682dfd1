"""The inference worker: a GGUF served through an OpenAI-compatible API.

Runs in the guest (its own no-swap cgroup) or on the host beside the VM. Imports only
`receipts` and pinned third-party wheels (llama-cpp-python, llguidance, starlette,
uvicorn, jsonschema, jinja2, numpy, pydantic, structlog), never `host` or `harness`,
because it ships into the guest's verified site directory.
"""
