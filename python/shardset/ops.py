"""Ops of the input pipeline (`shardset.torch.Loader`), declared here and
run in the library, on its threads, for every image of a batch:

    from shardset import ops
    train = [ops.RandomResizedCrop(224), ops.RandomHorizontalFlip(),
             ops.ToDtype("float32"), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]
    val = [ops.Resize(256), ops.CenterCrop(224), ops.ToDtype("float32"),
           ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]

Their parameters mean what torchvision.transforms.v2's do. Each op is a
plain dict (`{"op": name, ...}`), so a list of them pickles and prints as
what it is; the library checks every parameter when the loader is made and
names the column, the op and the parameter it refuses.

`ImageOps(ops)` applies a list to one encoded image, exactly as the loader
does to the sample at a position of an epoch: to look at what a transform
makes, or to time the per-image work alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import _shardset

if TYPE_CHECKING:
    import torch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Op(dict[str, Any]):
    """One declared op: `{"op": name, parameters...}`."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.items() if k != "op")
        return f"ops.{self['op']}({args})"


def _pair(size: int | Sequence[int]) -> list[int]:
    if isinstance(size, int):
        return [size, size]
    return [int(s) for s in size]


def Resize(size: int | Sequence[int]) -> Op:
    """An int: the shorter side becomes `size` (the other keeps the aspect
    ratio); `[h, w]`: exactly that size. Bilinear with antialiasing."""
    return Op(op="resize", size=size if isinstance(size, int) else _pair(size))


def CenterCrop(size: int | Sequence[int]) -> Op:
    """The centre `[h, w]` (an int: a square); padded with zeros where the
    image is smaller."""
    return Op(op="center_crop", size=_pair(size))


def RandomResizedCrop(size: int | Sequence[int], scale: Sequence[float] = (0.08, 1.0),
                      ratio: Sequence[float] = (3 / 4, 4 / 3)) -> Op:
    """A random crop of `scale` of the area and `ratio` aspect, resized to
    `size`."""
    return Op(op="random_resized_crop", size=_pair(size), scale=[float(s) for s in scale],
              ratio=[float(r) for r in ratio])


def RandomHorizontalFlip(p: float = 0.5) -> Op:
    """A mirror image with probability `p`."""
    return Op(op="random_horizontal_flip", p=float(p))


def ToDtype(dtype: str, scale: bool = True) -> Op:
    """Output elements of `dtype`: "uint8", "float32", "float16" or
    "bfloat16"; scale=True maps 0..255 to 0..1 for the float types."""
    return Op(op="to_dtype", dtype=str(dtype), scale=bool(scale))


def Normalize(mean: Sequence[float], std: Sequence[float]) -> Op:
    """`(x - mean) / std` per channel (after a float ToDtype)."""
    return Op(op="normalize", mean=[float(m) for m in mean], std=[float(s) for s in std])


class ImageOps:
    """A list of ops for one image column, checked now (a bad parameter is
    a `BadInputError` naming it), applied to encoded images (JPEG, PNG,
    WebP, ...) one at a time:

        train = ImageOps([RandomResizedCrop(224), RandomHorizontalFlip()])
        x = train(jpeg_bytes, seed=0, epoch=0, position=7)  # torch.Tensor [3, 224, 224]

    `position` is the sample's place in the epoch's order: with the
    loader's seed and epoch, the result is that sample's tensor in the
    loader's batch, bit for bit."""

    def __init__(self, ops: Sequence[Op], column: str = "image") -> None:
        self.ops = [Op(o) for o in ops]
        self._native = _shardset.ImageOps(json.dumps(self.ops), column)

    def __call__(self, encoded: bytes, *, seed: int = 0, epoch: int = 0, position: int = 0,
                 layout: str = "CHW") -> torch.Tensor:
        return self._native.apply(encoded, seed, epoch, position, layout)

    def __repr__(self) -> str:
        return f"ImageOps({self.ops!r})"


__all__ = ["Op", "ImageOps", "Resize", "CenterCrop", "RandomResizedCrop", "RandomHorizontalFlip", "ToDtype",
           "Normalize", "IMAGENET_MEAN", "IMAGENET_STD"]
