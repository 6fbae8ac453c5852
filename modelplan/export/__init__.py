"""Plan document (versioned JSON), engine launch configs, plan comparison and SVG pictures."""
