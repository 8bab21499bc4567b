"""tirxpy.primitives.reduce: implementations (registered on import)."""
