"""Whole-run questions on top of the planner: run time, energy and price; compute-optimal sizing;
serving memory and speed. Modules here consume counts and plan results; they never change them."""
