"""Sans-IO codecs for the shoe wire protocols (docs/devices.md).

Every codec offers ``Decoder.feed(t, data) -> list[Frame]`` and
``Encoder.encode(frame) -> bytes``. No sockets, no serial ports, no clocks:
the caller passes the read time with every chunk.
"""
