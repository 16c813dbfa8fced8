"""Test configuration: tests import the product from the ``operator/`` source root."""
