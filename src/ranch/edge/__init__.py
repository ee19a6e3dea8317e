"""What every request passes before its road is chosen: trace ids, keys, visibility, rate limits."""
