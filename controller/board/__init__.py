"""``shoe-controller board``: the live roadmap display.

A read-only client of the controllers' MQTT outputs (docs/operations.md, MQTT) that
serves, for one or more tables, a page a kiosk browser shows full-screen,
updated live by server-sent events. It has no command path: it never
publishes, and its HTTP side answers GET and HEAD only.

Modules: :mod:`.config` (the YAML config and its bounds), :mod:`.state`
(the pure state model: MQTT messages in, the page's view out),
:mod:`.subscriber` (the paho client), :mod:`.app` (the Starlette app, the
SSE hub and the server); the page itself is ``static/``.
"""
