"""Agents and teams a hub serves: built from the config and the `agents` table, one catalog."""
