"""Validated inputs: model, training settings, hardware/cluster and plan specs (pydantic)."""
