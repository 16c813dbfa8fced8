"""The watch layer: list and watch the API into the cache the sessions read, the binds in flight
assumed on top of it, and the policy file reloaded when it changes."""
