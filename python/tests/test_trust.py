"""Untrusted caches from Python and in DataLoader workers: a video path
cell naming a file outside the cache is refused with an error naming it,
unless its directory is trusted by name."""

import os
import shutil

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from torch.utils.data import DataLoader

import shardset
from shardset.torch import MapDataset

from conftest import GOLDEN


def crafted(tmp_path, name, stored):
    """The reference's golden path cache with every stored path rewritten."""
    d = tmp_path / name
    shutil.copytree(os.path.join(GOLDEN, "arrow_video_path"), d)
    shard = d / "shard-00000.arrow"
    with pa.memory_map(str(shard)) as f:
        t = ipc.open_file(f).read_all()
    cols = []
    for col in t.columns:
        if pa.types.is_struct(col.type) and col.type.get_field_index("path") >= 0:
            s = col.combine_chunks()
            fields = [s.field(i) if s.type.field(i).name != "path"
                      else pa.array([stored] * len(s), pa.string())
                      for i in range(s.type.num_fields)]
            col = pa.StructArray.from_arrays(fields, fields=list(s.type))
        cols.append(col)
    t = pa.Table.from_arrays(cols, schema=t.schema)
    with ipc.new_file(str(shard), t.schema) as w:
        w.write_table(t)
    return str(d)


def test_paths_outside_the_cache_are_refused_and_trusted_roots_allow_them(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    shutil.copy(os.path.join(GOLDEN, "sources", "clip_a.mp4"), videos / "a.mp4")
    for stored in [str(videos / "a.mp4"), "../../videos/a.mp4", "/dev/zero",
                   "concat:a.mp4|b.mp4"]:
        d = crafted(tmp_path, f"c{abs(hash(stored))}", stored)
        ds = shardset.open_cache(d)
        with pytest.raises(shardset.CorruptCacheError, match="is refused") as e:
            ds[0]
        assert repr(stored)[1:-1] in str(e.value) or stored in str(e.value)
        # The same in DataLoader workers.
        loader = DataLoader(MapDataset(d), batch_size=None, num_workers=1,
                            collate_fn=lambda r: r, timeout=120)
        with pytest.raises(shardset.CorruptCacheError, match="is refused"):
            next(iter(loader))
    d = crafted(tmp_path, "abs", str(videos / "a.mp4"))
    with pytest.raises(shardset.CorruptCacheError, match="trusted_roots"):
        shardset.open_cache(d)[0]
    row = shardset.open_cache(d, trusted_roots=[videos])[0]
    assert str(videos / "a.mp4") in str(row["video"])
    # A pickled dataset keeps its trusted roots (DataLoader workers).
    loader = DataLoader(MapDataset(d, trusted_roots=[str(videos)]), batch_size=None,
                        num_workers=1, collate_fn=lambda r: r, timeout=120)
    assert str(videos / "a.mp4") in str(next(iter(loader))["video"])
    with pytest.raises(shardset.BadInputError, match="nope"):
        shardset.open_cache(d, trusted_roots=[tmp_path / "nope"])


def test_decode_limits_refuse_large_frames_and_windows_and_can_be_raised(tmp_path):
    d = tmp_path / "frames"
    shutil.copytree(os.path.join(GOLDEN, "lance_video_frames"), d)
    with pytest.raises(shardset.CorruptCacheError, match="max_frame_pixels"):
        shardset.open_cache(d, max_frame_pixels=100)
    with pytest.raises(shardset.CorruptCacheError, match="max_window_frames"):
        shardset.open_cache(d, window=4, max_window_frames=3)
    with pytest.raises(shardset.BadInputError, match="max_image_pixels"):
        shardset.open_cache(d, max_image_pixels=0)
    ds = shardset.open_cache(d, window=3, max_window_frames=3)
    assert ds[0]["video"].shape[0] == 3
