"""shoe-controller: the baccarat shoe controller's game side and daemon."""

__version__ = "0.1.0"
