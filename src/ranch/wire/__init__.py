"""A2A on the wire: cards, outbound client, extension negotiation. Knows nothing of teams."""
