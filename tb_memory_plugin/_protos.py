"""Protobuf message classes declared from a field table, for reading only the fields we need.

TensorBoard ships no XPlane protos, and the full compat protos cost a Python
object per field read: each reader declares the few fields it reads, by number.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

# What protobuf raises for bytes it refuses: upb, DecodeError; its pure-Python implementation
# (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python) UnicodeDecodeError for text that is not UTF-8.
REFUSED = (DecodeError, UnicodeDecodeError)


def as_text(texts: list) -> list[str]:
    """Text fields as upb hands them over (proto2 text: str, or bytes where it is not UTF-8), all as
    str, U+FFFD where they are not UTF-8 (names from other writers are shown, not refused); the
    list itself, in one C-level check, where all are str already."""
    try:
        "\n".join(texts)
        return texts
    except TypeError:
        return [text.decode("utf-8", "replace") if isinstance(text, bytes) else text for text in texts]

INT64 = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
BYTES = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED

# (field name, number, type, label, message type name or None)
Field = tuple


def message_classes(package: str, schema: dict[str, list[Field]], unpacked_ints: bool = False) -> dict:
    """Message classes by name for `schema` (message name -> fields), in a pool of their own.

    unpacked_ints: repeated int64 fields read one varint per occurrence, as a
    singular field written many times is (see sources/run_metadata/merged.py).
    """
    file_proto = descriptor_pb2.FileDescriptorProto(name=f"{package.replace('.', '_')}.proto", package=package,
                                                    syntax="proto2")
    for name, fields in schema.items():
        message = file_proto.message_type.add(name=name)
        for field_name, number, field_type, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=field_type, label=label)
            if type_name:
                field.type_name = f".{package}.{type_name}"
            if unpacked_ints and field_type == INT64 and label == REPEATED:
                field.options.packed = False
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}")) for name in schema}


def encode_varint(value: int) -> bytes:
    """A protobuf varint (negative values as their 64-bit two's complement, as int64 fields are)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
