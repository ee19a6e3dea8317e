"""Who is calling: principals, API keys, sessions, and what of the hub they may see."""
