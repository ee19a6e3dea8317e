"""Rooms shared by people and agents: messages, executions, deliveries and live events."""
