from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RowIdSequence(_message.Message):
    __slots__ = ("segments",)
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    segments: _containers.RepeatedCompositeFieldContainer[U64Segment]
    def __init__(self, segments: _Optional[_Iterable[_Union[U64Segment, _Mapping]]] = ...) -> None: ...

class U64Segment(_message.Message):
    __slots__ = ("range", "range_with_holes", "range_with_bitmap", "sorted_array", "array")
    class Range(_message.Message):
        __slots__ = ("start", "end")
        START_FIELD_NUMBER: _ClassVar[int]
        END_FIELD_NUMBER: _ClassVar[int]
        start: int
        end: int
        def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...
    class RangeWithHoles(_message.Message):
        __slots__ = ("start", "end", "holes")
        START_FIELD_NUMBER: _ClassVar[int]
        END_FIELD_NUMBER: _ClassVar[int]
        HOLES_FIELD_NUMBER: _ClassVar[int]
        start: int
        end: int
        holes: EncodedU64Array
        def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ..., holes: _Optional[_Union[EncodedU64Array, _Mapping]] = ...) -> None: ...
    class RangeWithBitmap(_message.Message):
        __slots__ = ("start", "end", "bitmap")
        START_FIELD_NUMBER: _ClassVar[int]
        END_FIELD_NUMBER: _ClassVar[int]
        BITMAP_FIELD_NUMBER: _ClassVar[int]
        start: int
        end: int
        bitmap: bytes
        def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ..., bitmap: _Optional[bytes] = ...) -> None: ...
    RANGE_FIELD_NUMBER: _ClassVar[int]
    RANGE_WITH_HOLES_FIELD_NUMBER: _ClassVar[int]
    RANGE_WITH_BITMAP_FIELD_NUMBER: _ClassVar[int]
    SORTED_ARRAY_FIELD_NUMBER: _ClassVar[int]
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    range: U64Segment.Range
    range_with_holes: U64Segment.RangeWithHoles
    range_with_bitmap: U64Segment.RangeWithBitmap
    sorted_array: EncodedU64Array
    array: EncodedU64Array
    def __init__(self, range: _Optional[_Union[U64Segment.Range, _Mapping]] = ..., range_with_holes: _Optional[_Union[U64Segment.RangeWithHoles, _Mapping]] = ..., range_with_bitmap: _Optional[_Union[U64Segment.RangeWithBitmap, _Mapping]] = ..., sorted_array: _Optional[_Union[EncodedU64Array, _Mapping]] = ..., array: _Optional[_Union[EncodedU64Array, _Mapping]] = ...) -> None: ...

class EncodedU64Array(_message.Message):
    __slots__ = ("u16_array", "u32_array", "u64_array")
    class U16Array(_message.Message):
        __slots__ = ("base", "offsets")
        BASE_FIELD_NUMBER: _ClassVar[int]
        OFFSETS_FIELD_NUMBER: _ClassVar[int]
        base: int
        offsets: bytes
        def __init__(self, base: _Optional[int] = ..., offsets: _Optional[bytes] = ...) -> None: ...
    class U32Array(_message.Message):
        __slots__ = ("base", "offsets")
        BASE_FIELD_NUMBER: _ClassVar[int]
        OFFSETS_FIELD_NUMBER: _ClassVar[int]
        base: int
        offsets: bytes
        def __init__(self, base: _Optional[int] = ..., offsets: _Optional[bytes] = ...) -> None: ...
    class U64Array(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: bytes
        def __init__(self, values: _Optional[bytes] = ...) -> None: ...
    U16_ARRAY_FIELD_NUMBER: _ClassVar[int]
    U32_ARRAY_FIELD_NUMBER: _ClassVar[int]
    U64_ARRAY_FIELD_NUMBER: _ClassVar[int]
    u16_array: EncodedU64Array.U16Array
    u32_array: EncodedU64Array.U32Array
    u64_array: EncodedU64Array.U64Array
    def __init__(self, u16_array: _Optional[_Union[EncodedU64Array.U16Array, _Mapping]] = ..., u32_array: _Optional[_Union[EncodedU64Array.U32Array, _Mapping]] = ..., u64_array: _Optional[_Union[EncodedU64Array.U64Array, _Mapping]] = ...) -> None: ...

class RowDatasetVersionSequence(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RowDatasetVersionRun]
    def __init__(self, runs: _Optional[_Iterable[_Union[RowDatasetVersionRun, _Mapping]]] = ...) -> None: ...

class RowDatasetVersionRun(_message.Message):
    __slots__ = ("span", "version")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    span: U64Segment
    version: int
    def __init__(self, span: _Optional[_Union[U64Segment, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...
