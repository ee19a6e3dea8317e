"""Who answers next: the client-routing extension, the Router and Team."""
