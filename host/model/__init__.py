"""Model pipeline: pin tables, safetensors parsing, GGUF conversion and verification.

Each module does one job so that each refusal has one home and one test.
"""
