"""Built-in plugins, one concern each, registered through the ``caldera.plugins`` entry points."""
