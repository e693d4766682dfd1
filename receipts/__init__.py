"""Closed evidence: record models, canonical JSON, the receipt bundle and its audit.

A pure library: it imports nothing else of ours, so the guest (which may import only
receipts and its pinned wheels) and the host share one definition of every record.
"""
