"""Retention: finished things forgotten once past their lifetime (docs/deploy.md, "Retention").

`policy` reads the lifetimes (the config's `retention:`, flags and environment), `kinds` says what
each one prunes and what is never pruned, `pruner` deletes in small batches, `turns` lets one
replica at a time run a round, and `rounds` is the hub's background loop that reports each round.
"""
