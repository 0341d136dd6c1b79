"""The pure core: specs, version rules, the ledger, the planner and the tuner.

Standard library only. Nothing here does I/O or imports from the rest of the package.
"""
