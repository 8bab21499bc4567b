"""tirxpy.primitives.elementwise: implementations (registered on import)."""
