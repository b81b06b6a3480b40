"""Transports: each driver yields ``(t, bytes)`` chunks and never
interprets a card."""
