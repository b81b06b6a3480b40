"""The USB driver, run against pyusb itself with a fake backend.

``FakeBackend`` implements pyusb's ``usb.backend.IBackend`` (enumeration,
descriptors, open/claim, kernel-driver detach, bulk and interrupt transfers,
string descriptors over control transfers) for scripted devices, and is
handed to the driver as its ``backend``: pyusb's own ``usb.core.find`` and
``Device`` do the rest, exactly as with libusb. No patching of our code.
"""

from __future__ import annotations

import array
import errno
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
import usb.backend
import usb.core

from drivers.base import LinkDownError, LinkEvent
from drivers.usb import UsbDriver
from firmware_protocols import shoe_bin
from firmware_protocols.frames import Card, CutCard, Frame, Hello

VID, PID = 0x1234, 0x5678
BULK, INTR = 0x02, 0x03
UNPLUG = "unplug"


class FakeTime:
    """Monotonic time that only moves when the driver sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


class FakeDevice:
    """One scripted USB device: interface 0 with an IN endpoint 0x81 (bulk
    or interrupt) and an OUT endpoint 0x02. ``reads`` holds what successive
    reads return: bytes, an exception to raise, or ``UNPLUG``."""

    def __init__(
        self,
        serial: str = "SHOE-0001",
        *,
        vid: int = VID,
        pid: int = PID,
        ep_type: int = BULK,
        kernel_driver: bool = False,
        configured: bool = True,
    ) -> None:
        self.serial = serial
        self.vid, self.pid = vid, pid
        self.ep_type = ep_type
        self.present = True
        self.kernel_driver_active = kernel_driver
        self.config_value = 1 if configured else 0
        self.reads: deque[bytes | BaseException | str] = deque()
        self.claimed: set[int] = set()
        self.detached = 0
        self.attached = 0
        self.handles_open = 0
        self.set_configuration_calls = 0
        self.written: list[bytes] = []
        self.read_kinds: list[str] = []


def no_device() -> usb.core.USBError:
    return usb.core.USBError("No such device (it may have been disconnected)", -4, errno.ENODEV)


class FakeBackend(usb.backend.IBackend):  # type: ignore[misc]
    def __init__(self, *devices: FakeDevice, clock: FakeTime | None = None) -> None:
        super().__init__()
        self.devices = list(devices)
        self.clock = clock
        self.enumerations: list[float] = []

    # -- enumeration and descriptors --

    def enumerate_devices(self) -> Any:
        self.enumerations.append(self.clock.now if self.clock else 0.0)
        return [d for d in self.devices if d.present]

    def get_parent(self, dev: FakeDevice) -> None:
        return None

    def get_device_descriptor(self, dev: FakeDevice) -> Any:
        return SimpleNamespace(
            bLength=18,
            bDescriptorType=1,
            bcdUSB=0x0200,
            bDeviceClass=0,
            bDeviceSubClass=0,
            bDeviceProtocol=0,
            bMaxPacketSize0=64,
            idVendor=dev.vid,
            idProduct=dev.pid,
            bcdDevice=0x0100,
            iManufacturer=1,
            iProduct=2,
            iSerialNumber=3,
            bNumConfigurations=1,
            address=7,
            bus=1,
            port_number=2,
            port_numbers=(2,),
            speed=2,
        )

    def get_configuration_descriptor(self, dev: FakeDevice, config: int) -> Any:
        return SimpleNamespace(
            bLength=9,
            bDescriptorType=2,
            wTotalLength=32,
            bNumInterfaces=1,
            bConfigurationValue=1,
            iConfiguration=0,
            bmAttributes=0x80,
            bMaxPower=50,
            extra_descriptors=[],
        )

    def get_interface_descriptor(self, dev: FakeDevice, intf: int, alt: int, config: int) -> Any:
        return SimpleNamespace(
            bLength=9,
            bDescriptorType=4,
            bInterfaceNumber=0,
            bAlternateSetting=0,
            bNumEndpoints=2,
            bInterfaceClass=0xFF,
            bInterfaceSubClass=0,
            bInterfaceProtocol=0,
            iInterface=0,
            extra_descriptors=[],
        )

    def get_endpoint_descriptor(self, dev: FakeDevice, ep: int, intf: int, alt: int, config: int) -> Any:
        address, attributes = [(0x81, dev.ep_type), (0x02, BULK)][ep]
        return SimpleNamespace(
            bLength=7,
            bDescriptorType=5,
            bEndpointAddress=address,
            bmAttributes=attributes,
            wMaxPacketSize=64,
            bInterval=1,
            bRefresh=0,
            bSynchAddress=0,
            extra_descriptors=[],
        )

    # -- handles, configuration, interfaces --

    def open_device(self, dev: FakeDevice) -> FakeDevice:
        if not dev.present:
            raise no_device()
        dev.handles_open += 1
        return dev

    def close_device(self, handle: FakeDevice) -> None:
        handle.handles_open -= 1

    def set_configuration(self, handle: FakeDevice, config_value: int) -> None:
        handle.set_configuration_calls += 1
        handle.config_value = config_value

    def get_configuration(self, handle: FakeDevice) -> int:
        return handle.config_value

    def claim_interface(self, handle: FakeDevice, intf: int) -> None:
        if handle.kernel_driver_active:
            raise usb.core.USBError("Resource busy", -6, errno.EBUSY)
        handle.claimed.add(intf)

    def release_interface(self, handle: FakeDevice, intf: int) -> None:
        if not handle.present:
            raise no_device()
        handle.claimed.discard(intf)

    def is_kernel_driver_active(self, handle: FakeDevice, intf: int) -> bool:
        return handle.kernel_driver_active

    def detach_kernel_driver(self, handle: FakeDevice, intf: int) -> None:
        handle.kernel_driver_active = False
        handle.detached += 1

    def attach_kernel_driver(self, handle: FakeDevice, intf: int) -> None:
        if not handle.present:
            raise no_device()
        handle.kernel_driver_active = True
        handle.attached += 1

    # -- transfers --

    def _read(self, kind: str, handle: FakeDevice, ep: int, buff: array.array[int]) -> int:
        assert ep == 0x81
        assert 0 in handle.claimed, "read before the interface was claimed"
        handle.read_kinds.append(kind)
        if not handle.present:
            raise no_device()
        if not handle.reads:
            raise usb.core.USBTimeoutError("Operation timed out", -7, errno.ETIMEDOUT)
        item = handle.reads.popleft()
        if item == UNPLUG:
            handle.present = False
            raise no_device()
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, bytes)
        buff[: len(item)] = array.array("B", item)
        return len(item)

    def bulk_read(self, handle: FakeDevice, ep: int, intf: int, buff: array.array[int], timeout: int) -> int:
        assert timeout > 0, "0 means wait forever to libusb"
        return self._read("bulk", handle, ep, buff)

    def intr_read(self, handle: FakeDevice, ep: int, intf: int, buff: array.array[int], timeout: int) -> int:
        return self._read("intr", handle, ep, buff)

    def bulk_write(self, handle: FakeDevice, ep: int, intf: int, data: array.array[int], timeout: int) -> int:
        assert ep == 0x02
        if not handle.present:
            raise no_device()
        handle.written.append(data.tobytes())
        return len(data)

    def ctrl_transfer(
        self,
        handle: FakeDevice,
        bmRequestType: int,
        bRequest: int,
        wValue: int,
        wIndex: int,
        data: array.array[int],
        timeout: int,
    ) -> int:
        # GET_DESCRIPTOR(STRING): what pyusb sends to read serial_number
        assert (bmRequestType, bRequest, wValue >> 8) == (0x80, 0x06, 0x03)
        index = wValue & 0xFF
        if index == 0:
            payload = bytes([4, 3, 0x09, 0x04])  # LANGID en-US
        else:
            text = {1: "ACME", 2: "Card Shoe", 3: handle.serial}[index].encode("utf-16-le")
            payload = bytes([2 + len(text), 3]) + text
        payload = payload[: len(data)]
        data[: len(payload)] = array.array("B", payload)
        return len(payload)


def driver(backend: FakeBackend, clock: FakeTime | None = None, **kwargs: Any) -> UsbDriver:
    clock = clock or backend.clock or FakeTime()
    stamps = iter(range(1000, 100000))
    return UsbDriver(
        VID,
        PID,
        backend=backend,
        clock=lambda: float(next(stamps)),
        monotonic=clock.monotonic,
        sleep=clock.sleep,
        **kwargs,
    )


# -- finding and reading ---------------------------------------------------------


def test_reads_chunks_exactly_as_read_stamped_with_the_read_time() -> None:
    dev = FakeDevice()
    dev.reads.extend([b"\xa5\x5a\x03", b"\x10\x01\x00"])
    drv = driver(FakeBackend(dev))
    drv.open()
    assert dev.claimed == {0}
    assert drv.read(0.5) == (1000.0, b"\xa5\x5a\x03")
    assert drv.read(0.5) == (1001.0, b"\x10\x01\x00")
    assert dev.read_kinds == ["bulk", "bulk"]


def test_a_read_timeout_is_not_an_error_only_nothing_yet() -> None:
    dev = FakeDevice()
    drv = driver(FakeBackend(dev))
    drv.open()
    assert drv.read(0.001) is None
    assert drv.read(0.0) is None  # still a finite libusb timeout (asserted by the fake)
    dev.reads.append(b"x")
    assert drv.read(0.1) == (1000.0, b"x")
    assert drv.is_up


def test_a_zero_length_packet_hands_out_nothing() -> None:
    dev = FakeDevice()
    dev.reads.extend([b"", b"y"])
    drv = driver(FakeBackend(dev))
    drv.open()
    assert drv.read(0.1) is None
    assert drv.read(0.1) == (1000.0, b"y")


def test_an_interrupt_endpoint_is_read_with_interrupt_transfers() -> None:
    dev = FakeDevice(ep_type=INTR)
    dev.reads.append(b"hid report")
    drv = driver(FakeBackend(dev))
    drv.open()
    assert drv.read(0.1) == (1000.0, b"hid report")
    assert dev.read_kinds == ["intr"]


def test_the_serial_number_picks_one_shoe_among_identical_ones() -> None:
    first, second = FakeDevice("SHOE-A"), FakeDevice("SHOE-B")
    second.reads.append(b"from B")
    drv = driver(FakeBackend(first, second), serial_number="SHOE-B")
    drv.open()
    assert second.claimed == {0} and first.claimed == set()
    assert drv.read(0.1) == (1000.0, b"from B")


def test_other_vendor_or_product_ids_are_not_taken() -> None:
    drv = driver(FakeBackend(FakeDevice(vid=0x1111), FakeDevice(pid=0x2222)))
    drv.open()
    event = drv.read(0.0)
    assert isinstance(event, LinkEvent) and not event.up
    assert "not found" in event.detail


def test_an_unconfigured_device_is_configured() -> None:
    dev = FakeDevice(configured=False)
    drv = driver(FakeBackend(dev))
    drv.open()
    assert dev.set_configuration_calls == 1
    assert drv.is_up


# -- the kernel driver and close ---------------------------------------------------


def test_an_active_kernel_driver_is_detached_before_claiming_and_given_back_on_close() -> None:
    dev = FakeDevice(kernel_driver=True)
    drv = driver(FakeBackend(dev))
    drv.open()
    assert dev.detached == 1 and dev.claimed == {0}
    drv.close()
    assert dev.claimed == set()
    assert dev.attached == 1 and dev.kernel_driver_active
    assert dev.handles_open == 0


def test_close_is_idempotent_and_frees_the_device() -> None:
    dev = FakeDevice()
    drv = driver(FakeBackend(dev))
    drv.open()
    drv.close()
    drv.close()
    assert dev.claimed == set() and dev.handles_open == 0 and dev.attached == 0
    with pytest.raises(RuntimeError):
        drv.read(0.1)


# -- unplug, absence and reconnecting -------------------------------------------


def test_unplug_reports_the_link_down_then_up_again_when_replugged() -> None:
    clock = FakeTime()
    dev = FakeDevice()
    dev.reads.extend([b"before", UNPLUG])
    backend = FakeBackend(dev, clock=clock)
    drv = driver(backend, clock, backoff_initial=0.1, backoff_max=1.0)
    drv.open()
    assert drv.read(0.1) == (1000.0, b"before")
    down = drv.read(0.1)
    assert isinstance(down, LinkEvent) and down.up is False
    assert "unplugged" in down.detail
    assert not drv.is_up
    assert drv.read(0.05) is None  # still away
    replugged = FakeDevice()  # re-enumerated: a new device object
    replugged.reads.append(b"after")
    backend.devices = [replugged]
    up = drv.read(1.0)
    assert isinstance(up, LinkEvent) and up.up is True
    assert drv.read(0.1) == (up.t + 1, b"after")
    assert drv.reconnects == 1


def test_an_absent_device_at_open_is_a_link_down_not_an_exception() -> None:
    clock = FakeTime()
    backend = FakeBackend(clock=clock)
    drv = driver(backend, clock, backoff_initial=0.1)
    drv.open()
    down = drv.read(0.1)
    assert isinstance(down, LinkEvent) and not down.up
    backend.devices = [FakeDevice()]
    up = drv.read(1.0)
    assert isinstance(up, LinkEvent) and up.up


def test_reconnect_attempts_back_off_exponentially_up_to_the_cap() -> None:
    clock = FakeTime()
    backend = FakeBackend(clock=clock)
    drv = driver(backend, clock, backoff_initial=0.1, backoff_max=1.0)
    drv.open()
    drv.read(0.0)  # the LinkEvent(up=False) of the failed open
    backend.enumerations.clear()
    assert drv.read(6.0) is None
    intervals = [
        round(b - a, 6) for a, b in zip(backend.enumerations, backend.enumerations[1:], strict=False)
    ]
    assert intervals[:7] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert all(s >= 0 for s in clock.slept)


def test_backoff_starts_again_from_the_beginning_after_a_reconnect() -> None:
    clock = FakeTime()
    dev = FakeDevice()
    dev.reads.append(UNPLUG)
    backend = FakeBackend(dev, clock=clock)
    drv = driver(backend, clock, backoff_initial=0.1, backoff_max=1.0)
    drv.open()
    drv.read(0.1)  # down
    dev.present = True
    assert isinstance(drv.read(5.0), LinkEvent)
    dev.reads.append(UNPLUG)
    drv.read(0.1)  # down again
    lost_at = clock.now
    backend.devices = []
    backend.enumerations.clear()
    drv.read(0.35)
    attempts = [round(t - lost_at, 6) for t in backend.enumerations]
    assert attempts == [0.1, 0.3]  # 0.1 s after the loss, then 0.2 s later: not from the old 1.0 cap


def test_any_other_usb_error_also_resets_the_link() -> None:
    clock = FakeTime()
    dev = FakeDevice()
    dev.reads.append(usb.core.USBError("Pipe error", -9, errno.EPIPE))
    dev.reads.append(b"ok")
    drv = driver(FakeBackend(dev, clock=clock), clock, backoff_initial=0.1)
    drv.open()
    down = drv.read(0.1)
    assert isinstance(down, LinkEvent) and not down.up and "Pipe error" in down.detail
    up = drv.read(1.0)
    assert isinstance(up, LinkEvent) and up.up
    assert drv.read(0.1) == (up.t + 1, b"ok")


def test_busy_interface_is_retried_like_an_absent_device() -> None:
    clock = FakeTime()
    dev = FakeDevice()
    backend = FakeBackend(dev, clock=clock)
    dev.claimed = set()
    # another program holds the interface: claiming fails with EBUSY
    original = backend.claim_interface

    def busy(handle: FakeDevice, intf: int) -> None:
        raise usb.core.USBError("Resource busy", -6, errno.EBUSY)

    backend.claim_interface = busy  # type: ignore[method-assign]
    drv = driver(backend, clock, backoff_initial=0.1)
    drv.open()
    down = drv.read(0.0)
    assert isinstance(down, LinkEvent) and "Resource busy" in down.detail
    assert dev.handles_open == 0  # nothing left half-open
    backend.claim_interface = original  # type: ignore[method-assign]
    up = drv.read(1.0)
    assert isinstance(up, LinkEvent) and up.up


# -- writing ---------------------------------------------------------------------


def test_write_goes_to_the_out_endpoint() -> None:
    dev = FakeDevice()
    drv = driver(FakeBackend(dev))
    drv.open()
    drv.write(b"\x02OPLK02\x0319")
    assert dev.written == [b"\x02OPLK02\x0319"]


def test_write_while_down_raises_link_down() -> None:
    drv = driver(FakeBackend())
    drv.open()
    with pytest.raises(LinkDownError):
        drv.write(b"x")


# -- as a chunk source -----------------------------------------------------------


def test_chunks_yields_only_bytes_across_an_unplug_until_closed() -> None:
    clock = FakeTime()
    dev = FakeDevice()
    dev.reads.extend([b"one", UNPLUG])
    backend = FakeBackend(dev, clock=clock)
    drv = driver(backend, clock, backoff_initial=0.1)
    got: list[bytes] = []
    for t, data in drv.chunks(timeout=0.5):
        assert isinstance(t, float)
        got.append(data)
        if data == b"one":
            replugged = FakeDevice()
            replugged.reads.append(b"two")
            backend.devices = [replugged]
        else:
            drv.close()
    assert got == [b"one", b"two"]


def test_usb_chunks_decode_as_shoe_bin_frames() -> None:
    encoder = shoe_bin.Encoder()
    frames: list[Frame] = [Hello(0.0, 0, "USB-SHOE", "2.1", "SHOE-0001"), Card(0.0, 1, "QS"), CutCard(0.0, 2)]
    stream = b"".join(encoder.encode(f) for f in frames)
    dev = FakeDevice()
    dev.reads.extend(stream[i : i + 7] for i in range(0, len(stream), 7))  # frames split across packets
    drv = driver(FakeBackend(dev))
    drv.open()
    decoder = shoe_bin.Decoder()
    out: list[Frame] = []
    while (item := drv.read(0.1)) is not None:
        assert isinstance(item, tuple)
        out += decoder.feed(0.0, item[1])
    assert out == frames


def test_a_serial_number_that_cannot_be_read_is_named_in_the_link_detail() -> None:
    class NoStrings(FakeBackend):
        def ctrl_transfer(self, *args: Any) -> int:
            raise usb.core.USBError("Access denied (insufficient permissions)", -3, errno.EACCES)

    drv = driver(NoStrings(FakeDevice()), serial_number="SHOE-0001")
    drv.open()
    down = drv.read(0.0)
    assert isinstance(down, LinkEvent)
    # pyusb turns the refused string request into "no langid (permission issue...)"
    assert "not found (serial number unreadable" in down.detail and "permission" in down.detail
