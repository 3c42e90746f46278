"""HTTP layer: one router module per resource, injectables in deps.py, thin handlers."""
