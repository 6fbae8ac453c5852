"""Plans: rank grid, pipeline schedules (as data), communication lists, cost and memory models, search."""
