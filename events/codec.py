"""Encoding events as JSON (msgspec) and decoding them back, with upcasting.

A stored event's topic is ``"<Type>@<schema version>"``; its state is the event's
JSON (``{"type": ..., "at": ..., ...}``). Decoding an older version runs the
registered upcasters (``register_upcaster``) one version at a time on the JSON
object before it becomes the current type. An unknown type or a version newer
than the code knows is a clear ``StoreError``, never a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from events.catalogue import EVENT_TYPES, Event
from events.errors import NewerSchemaVersion, UndecodableEvent, UnknownEventType

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(type_name: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Decorator: ``fn(old JSON object) -> JSON object one version newer``."""

    def deco(fn: Upcaster) -> Upcaster:
        UPCASTERS[(type_name, from_version)] = fn
        return fn

    return deco


class Codec:
    """Turns events into ``(topic, bytes)`` and back."""

    def __init__(
        self,
        types: Mapping[str, type[Event]] = EVENT_TYPES,
        upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS,
    ) -> None:
        self.types = dict(types)
        self.upcasters = upcasters
        self._encoder = msgspec.json.Encoder()
        self.decoders: dict[str, Callable[[bytes], Event]] = {
            f"{name}@{cls.schema_version}": msgspec.json.Decoder(cls).decode for name, cls in self.types.items()
        }

    def topic(self, event: Event) -> str:
        name = type(event).__name__
        if self.types.get(name) is not type(event):
            raise TypeError(f"{name} is not in the event catalogue")
        return f"{name}@{event.schema_version}"

    def encode(self, event: Event) -> bytes:
        return self._encoder.encode(event)

    def decode(self, topic: str, data: bytes, seq: int = 0) -> Event:
        """Decode one stored event; ``seq`` names it in error messages."""
        try:
            fast = self.decoders.get(topic)
            return fast(data) if fast is not None else self._decode_slow(topic, data, f"#{seq}")
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            raise UndecodableEvent(
                f"stored event #{seq} ({topic}) cannot be decoded: {exc}",
                "its payload does not match its type",
                "report it as a bug; the store itself is intact and the other events are readable",
            ) from exc

    def _decode_slow(self, topic: str, data: bytes, where: str) -> Event:
        name, _, version_text = topic.partition("@")
        cls = self.types.get(name)
        if cls is None:
            raise UnknownEventType(
                f"stored event {where} has type {name!r}, which this version of Lopen does not know",
                "it was written by a newer or a modified Lopen",
                "upgrade Lopen to the version that wrote this store",
            )
        version = int(version_text or 1)
        if version > cls.schema_version:
            raise NewerSchemaVersion(
                f"stored event {where} is {name} schema v{version}; this Lopen knows up to v{cls.schema_version}",
                "the store was written by a newer Lopen",
                "upgrade Lopen to the version that wrote this store",
            )
        obj: dict[str, Any] = msgspec.json.decode(data)
        while version < cls.schema_version:
            upcast = self.upcasters.get((name, version))
            if upcast is None:
                raise NewerSchemaVersion(
                    f"no upcaster for {name} from v{version} to v{version + 1} (event {where})",
                    "an event type changed without a registered upcaster",
                    "register one with events.codec.register_upcaster; this is a bug in Lopen",
                )
            obj = upcast(obj)
            version += 1
        obj["type"] = name
        return msgspec.convert(obj, cls)


@register_upcaster("BlobStored", 1)
def _blob_as_is(obj: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 had no packing: the text as is, which is what schema 2 says with ``packing`` empty."""
    return obj
