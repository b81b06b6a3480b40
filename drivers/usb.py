"""The USB transport (``shoe-bin/1`` shoes on a bulk or interrupt endpoint)
over pyusb.

Owns one device, found by vendor and product id (and serial number, when
several shoes hang off one host): detaches the kernel driver from the
interface if one holds it, claims the interface, and reads its IN endpoint,
handing out chunks exactly as read with the time taken right after the
read. A read that times out is not an error, only "nothing yet". Unplug
(``ENODEV``) or any other USB error releases the device, reports
``LinkEvent(up=False)`` and retries with capped exponential backoff until
the device is back (``LinkEvent(up=True)``). :meth:`UsbDriver.close`
releases the interface and gives the interface back to the kernel driver
it was taken from.

pyusb's ``backend`` (libusb1 by default) can be passed in; the tests pass a
fake one that implements ``usb.backend.IBackend``, so everything here runs
against pyusb itself without hardware.

Permissions: the device node must be readable by the daemon's user; see
``systemd/99-shoe-controller.rules``.
"""

from __future__ import annotations

import contextlib
import errno
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import usb.core
import usb.util

from drivers.base import Chunk, LinkDownError, LinkEvent

#: libusb's LIBUSB_ERROR_TIMEOUT and LIBUSB_ERROR_NO_DEVICE, for backends
#: that report them without errno.
_LIBUSB_TIMEOUT = -7
_LIBUSB_NO_DEVICE = -4


def _is_timeout(exc: usb.core.USBError) -> bool:
    return (
        isinstance(exc, usb.core.USBTimeoutError)
        or exc.errno == errno.ETIMEDOUT
        or getattr(exc, "backend_error_code", None) == _LIBUSB_TIMEOUT
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, usb.core.USBError) and (
        exc.errno == errno.ENODEV or getattr(exc, "backend_error_code", None) == _LIBUSB_NO_DEVICE
    ):
        return f"device unplugged ({exc})"
    return str(exc) or type(exc).__name__


class UsbDriver:
    """A :class:`drivers.base.Driver` for a USB shoe.

    ``endpoint``: the IN endpoint address to read (e.g. ``0x81``); by
    default the first bulk or interrupt IN endpoint of ``interface``.
    ``read_size``: bytes asked for per read (a multiple of the endpoint's
    packet size is best; the default is 64 packets). ``backoff_initial`` is
    the delay before the first reconnect attempt after a loss; it doubles
    after each failed attempt up to ``backoff_max``. ``backend`` is a pyusb
    backend (default: the first pyusb finds, libusb1 in practice);
    ``clock`` stamps chunks, ``monotonic`` and ``sleep`` pace reconnects.
    """

    def __init__(
        self,
        vendor_id: int,
        product_id: int,
        serial_number: str | None = None,
        *,
        interface: int = 0,
        endpoint: int | None = None,
        read_size: int | None = None,
        backend: Any = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        write_timeout: float = 2.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if backoff_initial <= 0 or backoff_max < backoff_initial:
            raise ValueError("backoff: need 0 < backoff_initial <= backoff_max")
        self.vendor_id = vendor_id
        self.product_id = product_id
        self.serial_number = serial_number
        self.interface = interface
        self.endpoint = endpoint
        self.read_size = read_size
        self.backend = backend
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.write_timeout = write_timeout
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._dev: Any = None
        self._in_ep = 0
        self._out_ep: int | None = None
        self._size = 0
        self._detached = False
        self._events: deque[LinkEvent] = deque()
        self._started = False
        self._closed = False
        self._backoff = backoff_initial
        self._next_attempt = 0.0  # monotonic time of the next reconnect attempt
        #: Successful reconnects after a loss (for tests and metrics).
        self.reconnects = 0

    @property
    def name(self) -> str:
        serial = f" serial {self.serial_number}" if self.serial_number else ""
        return f"usb {self.vendor_id:04x}:{self.product_id:04x}{serial}"

    @property
    def is_up(self) -> bool:
        return self._dev is not None

    # -- lifecycle -----------------------------------------------------------

    def open(self) -> None:
        """Find and claim the device. A device that is absent now is not an
        error: the first :meth:`read` reports ``LinkEvent(up=False)`` and
        the driver keeps looking. No usable pyusb backend (libusb missing)
        is an error, since waiting will not fix it."""
        self._started = True
        self._closed = False
        if self._dev is not None:
            return
        try:
            self._connect()
        except usb.core.NoBackendError as exc:
            raise RuntimeError(f"{self.name}: no USB backend (install libusb-1.0): {exc}") from exc
        except (usb.core.USBError, LookupError, ValueError, NotImplementedError) as exc:
            self._go_down(f"cannot open {self.name}: {_describe(exc)}", initial=True)

    def close(self) -> None:
        """Release the interface, hand it back to its kernel driver, and
        free the device; idempotent."""
        self._closed = True
        self._started = False
        self._release(reattach=True)

    # -- I/O -----------------------------------------------------------------

    def read(self, timeout: float) -> Chunk | LinkEvent | None:
        """The next chunk ``(t, bytes)`` or link change, or ``None`` when
        nothing came within ``timeout`` seconds."""
        if not self._started:
            raise RuntimeError("UsbDriver.read before open()")
        if self._events:
            return self._events.popleft()
        dev = self._dev
        if dev is None:
            return self._wait_for_device(timeout)
        # libusb takes milliseconds, and 0 would mean "wait forever".
        timeout_ms = max(1, round(timeout * 1000))
        try:
            data = dev.read(self._in_ep, self._size, timeout_ms)
        except usb.core.USBError as exc:
            if _is_timeout(exc):
                return None
            self._go_down(f"{self.name}: {_describe(exc)}")
            return self._events.popleft()
        if not data:
            return None  # a zero-length packet: nothing to hand out
        return (self._clock(), bytes(data))

    def chunks(self, timeout: float = 1.0) -> Iterator[Chunk]:
        """Read in a loop until :meth:`close`, yielding only the chunks; the
        link changes in between (and reconnecting) happen silently. The
        daemon uses :meth:`read`, which reports them."""
        if not self._started:
            self.open()
        while not self._closed:
            item = self.read(timeout)
            if isinstance(item, tuple):
                yield item

    def write(self, data: bytes) -> None:
        """Send host bytes on the interface's OUT endpoint."""
        dev = self._dev
        if dev is None:
            raise LinkDownError(f"{self.name} is disconnected; {len(data)} bytes not sent")
        if self._out_ep is None:
            raise LinkDownError(f"{self.name} has no OUT endpoint on interface {self.interface}")
        try:
            dev.write(self._out_ep, data, max(1, round(self.write_timeout * 1000)))
        except usb.core.USBError as exc:
            self._go_down(f"{self.name}: write failed: {_describe(exc)}")
            raise LinkDownError(f"{self.name}: write failed: {exc}") from exc

    # -- internals -----------------------------------------------------------

    def _find(self) -> Any:
        wanted = self.serial_number
        unreadable: list[str] = []

        def serial_matches(dev: Any) -> bool:
            if wanted is None:
                return True
            try:
                return bool(dev.serial_number == wanted)
            except (usb.core.USBError, ValueError, NotImplementedError) as exc:
                unreadable.append(str(exc))  # typically no permission: see the udev rule
                return False

        dev = usb.core.find(
            backend=self.backend,
            idVendor=self.vendor_id,
            idProduct=self.product_id,
            custom_match=serial_matches,
        )
        if dev is None:
            why = f" (serial number unreadable on {len(unreadable)}: {unreadable[-1]})" if unreadable else ""
            raise LookupError(f"{self.name} not found{why}")
        return dev

    def _connect(self) -> None:
        dev = self._find()
        try:
            self._detached = False
            try:
                if dev.is_kernel_driver_active(self.interface):
                    # e.g. usbhid holding a HID-class shoe
                    dev.detach_kernel_driver(self.interface)
                    self._detached = True
            except NotImplementedError:
                pass  # platforms without kernel drivers to detach (macOS, Windows)
            try:
                cfg = dev.get_active_configuration()
            except usb.core.USBError:
                dev.set_configuration()
                cfg = dev.get_active_configuration()
            intf = usb.util.find_descriptor(cfg, bInterfaceNumber=self.interface)
            if intf is None:
                raise LookupError(f"{self.name} has no interface {self.interface}")
            in_ep = self._pick_in_endpoint(intf)
            out_ep = usb.util.find_descriptor(
                intf,
                custom_match=lambda e: (
                    usb.util.endpoint_direction(e.bEndpointAddress) == usb.util.ENDPOINT_OUT
                ),
            )
            usb.util.claim_interface(dev, self.interface)
        except BaseException:
            self._release_device(dev, reattach=True)
            raise
        self._dev = dev
        self._in_ep = in_ep.bEndpointAddress
        self._out_ep = None if out_ep is None else out_ep.bEndpointAddress
        self._size = self.read_size or in_ep.wMaxPacketSize * 64

    def _pick_in_endpoint(self, intf: Any) -> Any:
        def usable(e: Any) -> bool:
            if self.endpoint is not None:
                return bool(e.bEndpointAddress == self.endpoint)
            return usb.util.endpoint_direction(e.bEndpointAddress) == usb.util.ENDPOINT_IN and (
                usb.util.endpoint_type(e.bmAttributes)
                in (usb.util.ENDPOINT_TYPE_BULK, usb.util.ENDPOINT_TYPE_INTR)
            )

        ep = usb.util.find_descriptor(intf, custom_match=usable)
        if ep is None:
            which = (
                f"endpoint 0x{self.endpoint:02x}"
                if self.endpoint is not None
                else "bulk/interrupt IN endpoint"
            )
            raise LookupError(f"{self.name}: interface {self.interface} has no {which}")
        return ep

    def _release(self, *, reattach: bool) -> None:
        dev, self._dev = self._dev, None
        if dev is not None:
            self._release_device(dev, reattach=reattach)

    def _release_device(self, dev: Any, *, reattach: bool) -> None:
        # Each step may fail on an unplugged device; none of them then matters.
        with contextlib.suppress(usb.core.USBError, ValueError):
            usb.util.release_interface(dev, self.interface)
        if reattach and self._detached:
            # (after an unplug the kernel binds its driver afresh on replug)
            with contextlib.suppress(usb.core.USBError, NotImplementedError):
                dev.attach_kernel_driver(self.interface)
        self._detached = False
        with contextlib.suppress(usb.core.USBError):
            usb.util.dispose_resources(dev)

    def _go_down(self, detail: str, *, initial: bool = False) -> None:
        self._release(reattach=False)
        # After a loss the first attempt waits backoff_initial and the delays
        # double from there (0.1, 0.2, 0.4...); a failed open tries at once.
        delay = 0.0 if initial else self.backoff_initial
        self._next_attempt = self._monotonic() + delay
        self._backoff = min(max(delay * 2.0, self.backoff_initial), self.backoff_max)
        self._events.append(LinkEvent(self._clock(), False, detail))

    def _wait_for_device(self, timeout: float) -> LinkEvent | None:
        deadline = self._monotonic() + max(0.0, timeout)
        while not self._closed:
            now = self._monotonic()
            if now >= self._next_attempt:
                try:
                    self._connect()
                except (usb.core.USBError, LookupError, ValueError, NotImplementedError):
                    self._next_attempt = now + self._backoff
                    self._backoff = min(self._backoff * 2.0, self.backoff_max)
                else:
                    self._backoff = self.backoff_initial
                    self.reconnects += 1
                    return LinkEvent(self._clock(), True, f"{self.name} reconnected")
            now = self._monotonic()
            if now >= deadline:
                return None
            self._sleep(min(self._next_attempt, deadline) - now)
        return None
