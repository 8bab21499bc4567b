"""tirxpy.scope (see DESIGN.md section 1)."""
