"""Collectives: operations, bytes and steps per algorithm, alpha-beta times on cluster links."""
