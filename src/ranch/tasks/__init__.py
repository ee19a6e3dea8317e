"""The one task engine: runs, stores, lists and notifies A2A tasks (and room executions)."""
