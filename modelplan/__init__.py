"""modelplan: how big is a model, what does training it cost, how to split it, and is the split right.

Data flows one way: spec -> counts -> costs -> plans -> verification -> export.
Importing this package is cheap: numpy and the heavy modules are imported where they are used.
"""

__version__ = "0.1.0"
