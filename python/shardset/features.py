"""Features written the reference's way.

    Features({"x": Value("int32"), "label": ClassLabel(names=["cat", "dog"]),
              "image": Image(), "video": Video(storage="frames")})

Each class mirrors the stable-datasets feature of the same name and turns
into the JSON description a shardset cache stores in `_metadata.json`
(`Features.to_json()`), which is what the library reads.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any, ClassVar, Union, cast

# A feature's JSON description (an object of `_metadata.json`'s features).
Description = dict[str, Any]

DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "bool", "string", "binary")


class Value:
    def __init__(self, dtype: str) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"Unknown dtype {dtype!r}")
        self.dtype = dtype

    def describe(self) -> Description:
        return {"type": "Value", "dtype": self.dtype}

    def __repr__(self) -> str:
        return f"Value({self.dtype!r})"


class ClassLabel:
    def __init__(self, names: Iterable[str] | None = None,
                 num_classes: int | None = None) -> None:
        if names is not None:
            self.names = list(names)
        elif num_classes is not None:
            self.names = [str(i) for i in range(num_classes)]
        else:
            raise ValueError("ClassLabel needs names or num_classes")
        self.num_classes = len(self.names)

    def str2int(self, name: str) -> int:
        return self.names.index(name)

    def int2str(self, i: int) -> str:
        return self.names[i]

    def describe(self) -> Description:
        return {"type": "ClassLabel", "names": self.names}

    def __repr__(self) -> str:
        return f"ClassLabel(names={self.names!r})"


class Sequence:
    def __init__(self, feature: Feature) -> None:
        self.feature = feature

    def describe(self) -> Description:
        return {"type": "Sequence", "feature": self.feature.describe()}

    def __repr__(self) -> str:
        return f"Sequence({self.feature!r})"


class Image:
    def __init__(self, encode_format: str = "PNG") -> None:
        self.encode_format = encode_format

    def describe(self) -> Description:
        return {"type": "Image", "encode_format": self.encode_format}

    def __repr__(self) -> str:
        return f"Image(encode_format={self.encode_format!r})"


class _Array:
    rank: ClassVar[int] = 0

    def __init__(self, shape: Collection[int], dtype: str = "uint8",
                 fixed_size: bool = False) -> None:
        """fixed_size: store each cell as Arrow `fixed_size_binary` (no
        offsets; row i at i * cell bytes) instead of the reference's
        `large_binary`. Both read back the same arrays, by shardset and by
        the reference; it is not part of the repr (nor of the schema
        fingerprint)."""
        if len(shape) != self.rank:
            raise ValueError(f"{type(self).__name__} needs a shape of length {self.rank}, "
                             f"got {tuple(shape)}")
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.fixed_size = bool(fixed_size)

    def describe(self) -> Description:
        d: Description = {"type": type(self).__name__, "shape": list(self.shape),
                          "dtype": self.dtype}
        if self.fixed_size:
            d["fixed_size"] = True
        return d

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape!r}, dtype={self.dtype!r})"


class Array2D(_Array):
    rank = 2


class Array3D(_Array):
    rank = 3


class Array4D(_Array):
    rank = 4


class Array5D(_Array):
    rank = 5


_ARRAYS: dict[str, type[Array2D] | type[Array3D] | type[Array4D] | type[Array5D]] = {
    c.__name__: c for c in (Array2D, Array3D, Array4D, Array5D)}


class Video:
    def __init__(self, storage: str = "path",
                 allowed_extensions: Iterable[str] = (".mp4", ".avi", ".mov", ".webm",
                                                      ".mkv")) -> None:
        if storage not in ("path", "bytes", "frames", "segments"):
            raise ValueError(
                f"Video storage must be 'path', 'bytes', 'frames' or 'segments', got {storage!r}")
        self.storage = storage
        self.allowed_extensions = tuple(
            e.lower() if e.startswith(".") else "." + e.lower() for e in allowed_extensions)

    def describe(self) -> Description:
        return {"type": "Video", "storage": self.storage,
                "allowed_extensions": list(self.allowed_extensions)}

    def __repr__(self) -> str:
        return f"Video(storage={self.storage!r})"


# Any one feature.
Feature = Union[Value, ClassLabel, Sequence, Image, Array2D, Array3D, Array4D, Array5D, Video]


def _from_description(d: Mapping[str, Any]) -> Feature:
    t = d["type"]
    if t == "Value":
        return Value(d["dtype"])
    if t == "ClassLabel":
        return ClassLabel(names=d.get("names", []))
    if t == "Sequence":
        return Sequence(_from_description(d["feature"]))
    if t == "Image":
        return Image(d.get("encode_format", "PNG"))
    if t in _ARRAYS:
        return _ARRAYS[t](d["shape"], d["dtype"], d.get("fixed_size", False))
    if t == "Video":
        return Video(d.get("storage", "path"), d.get("allowed_extensions", ()))
    raise ValueError(f"unknown feature type {t!r}")


class Features(dict[str, Feature]):
    """Column name -> feature, in order."""

    def describe(self) -> dict[str, Description]:
        return {name: f.describe() for name, f in self.items()}

    def to_json(self) -> str:
        return json.dumps(self.describe())

    @classmethod
    def from_json(cls, text: str) -> Features:
        return cls({k: _from_description(v) for k, v in json.loads(text).items()})

    @classmethod
    def coerce(cls, features: FeaturesLike) -> Features:
        """Our Features, the reference's Features (anything with the same
        classes and attributes), or a JSON description (str or dict)."""
        if isinstance(features, str):
            return cls.from_json(features)
        if isinstance(features, Features):
            return features
        out = cls()
        for name, f in dict(features).items():
            out[name] = cast(Feature, f) if hasattr(f, "describe") else _from_foreign(f)
        return out


# What `Features.coerce` takes: our Features, the reference's (a mapping of
# name to feature objects of the same classes), or a JSON description (a
# str, or a mapping of name to description dicts).
FeaturesLike = Union[str, Mapping[str, Any]]


def _from_foreign(f: Any) -> Feature:
    """A feature object of the reference's package (same class names and
    attributes) or a description dict, as ours."""
    if isinstance(f, dict):
        return _from_description(f)
    kind = type(f).__name__
    if kind == "Value":
        return Value(f.dtype)
    if kind == "ClassLabel":
        return ClassLabel(names=list(f.names))
    if kind == "Sequence":
        return Sequence(_from_foreign(f.feature))
    if kind == "Image":
        return Image(getattr(f, "encode_format", "PNG"))
    if kind in _ARRAYS:
        return _ARRAYS[kind](f.shape, f.dtype, getattr(f, "fixed_size", False))
    if kind == "Video":
        return Video(f.storage, getattr(f, "allowed_extensions", (".mp4",)))
    raise TypeError(f"not a feature: {f!r}")
