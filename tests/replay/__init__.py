"""Tests of `ranch replay` and `ranch eval` (src/ranch/replay, docs/replay.md)."""
