"""tirxpy.primitives.copy: implementations (registered on import)."""
