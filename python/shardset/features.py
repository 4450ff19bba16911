"""Features written the reference's way.

    Features({"x": Value("int32"), "label": ClassLabel(names=["cat", "dog"]),
              "image": Image(), "video": Video(storage="frames")})

Each class mirrors the stable-datasets feature of the same name and turns
into the JSON description a shardset cache stores in `_metadata.json`
(`Features.to_json()`), which is what the library reads.
"""

import json

DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "bool", "string", "binary")


class Value:
    def __init__(self, dtype):
        if dtype not in DTYPES:
            raise ValueError(f"Unknown dtype {dtype!r}")
        self.dtype = dtype

    def describe(self):
        return {"type": "Value", "dtype": self.dtype}

    def __repr__(self):
        return f"Value({self.dtype!r})"


class ClassLabel:
    def __init__(self, names=None, num_classes=None):
        if names is None and num_classes is None:
            raise ValueError("ClassLabel needs names or num_classes")
        self.names = list(names) if names is not None else [str(i) for i in range(num_classes)]
        self.num_classes = len(self.names)

    def str2int(self, name):
        return self.names.index(name)

    def int2str(self, i):
        return self.names[i]

    def describe(self):
        return {"type": "ClassLabel", "names": self.names}

    def __repr__(self):
        return f"ClassLabel(names={self.names!r})"


class Sequence:
    def __init__(self, feature):
        self.feature = feature

    def describe(self):
        return {"type": "Sequence", "feature": self.feature.describe()}

    def __repr__(self):
        return f"Sequence({self.feature!r})"


class Image:
    def __init__(self, encode_format="PNG"):
        self.encode_format = encode_format

    def describe(self):
        return {"type": "Image", "encode_format": self.encode_format}

    def __repr__(self):
        return f"Image(encode_format={self.encode_format!r})"


class _Array:
    rank = 0

    def __init__(self, shape, dtype="uint8", fixed_size=False):
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

    def describe(self):
        d = {"type": type(self).__name__, "shape": list(self.shape), "dtype": self.dtype}
        if self.fixed_size:
            d["fixed_size"] = True
        return d

    def __repr__(self):
        return f"{type(self).__name__}(shape={self.shape!r}, dtype={self.dtype!r})"


class Array3D(_Array):
    rank = 3


class Array4D(_Array):
    rank = 4


class Video:
    def __init__(self, storage="path",
                 allowed_extensions=(".mp4", ".avi", ".mov", ".webm", ".mkv")):
        if storage not in ("path", "bytes", "frames", "segments"):
            raise ValueError(
                f"Video storage must be 'path', 'bytes', 'frames' or 'segments', got {storage!r}")
        self.storage = storage
        self.allowed_extensions = tuple(
            e.lower() if e.startswith(".") else "." + e.lower() for e in allowed_extensions)

    def describe(self):
        return {"type": "Video", "storage": self.storage,
                "allowed_extensions": list(self.allowed_extensions)}

    def __repr__(self):
        return f"Video(storage={self.storage!r})"


def _from_description(d):
    t = d["type"]
    if t == "Value":
        return Value(d["dtype"])
    if t == "ClassLabel":
        return ClassLabel(names=d.get("names", []))
    if t == "Sequence":
        return Sequence(_from_description(d["feature"]))
    if t == "Image":
        return Image(d.get("encode_format", "PNG"))
    if t in ("Array3D", "Array4D"):
        return (Array3D if t == "Array3D" else Array4D)(d["shape"], d["dtype"],
                                                        d.get("fixed_size", False))
    if t == "Video":
        return Video(d.get("storage", "path"), d.get("allowed_extensions", ()))
    raise ValueError(f"unknown feature type {t!r}")


class Features(dict):
    """Column name -> feature, in order."""

    def describe(self):
        return {name: f.describe() for name, f in self.items()}

    def to_json(self):
        return json.dumps(self.describe())

    @classmethod
    def from_json(cls, text):
        return cls({k: _from_description(v) for k, v in json.loads(text).items()})

    @classmethod
    def coerce(cls, features):
        """Our Features, the reference's Features (anything with the same
        classes and attributes), or a JSON description (str or dict)."""
        if isinstance(features, str):
            return cls.from_json(features)
        if isinstance(features, Features):
            return features
        out = cls()
        for name, f in dict(features).items():
            out[name] = f if hasattr(f, "describe") else _from_foreign(f)
        return out


def _from_foreign(f):
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
    if kind in ("Array3D", "Array4D"):
        return (Array3D if kind == "Array3D" else Array4D)(f.shape, f.dtype,
                                                           getattr(f, "fixed_size", False))
    if kind == "Video":
        return Video(f.storage, getattr(f, "allowed_extensions", (".mp4",)))
    raise TypeError(f"not a feature: {f!r}")
