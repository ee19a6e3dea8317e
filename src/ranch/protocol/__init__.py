"""What the hub and its client both speak, kept light: nothing here imports the server (its store,
its HTTP stack, the a2a-sdk's server), so `ranch.client` and the `ranch` commands start at once."""
