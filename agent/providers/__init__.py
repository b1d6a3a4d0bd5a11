"""Model providers: one module per API, each a `base.ModelAPI` subclass registered by its spec prefixes.

`registry.py` imports every module of this package and finds the class for a spec's prefix.
"""
