"""ppl-inspect's pool commands on real pool files: create, info, check,
dump, with --json; and what they say about damaged pools (a flipped bit in
a record, a damaged superblock, another file, a truncated pool): a clear
message and a non-zero status, and nothing changed by looking."""
import hashlib
import json
import os
import struct
import subprocess

import pytest

from lib import paths


def inspect(*args, check=None):
    p = subprocess.run([paths.tool("ppl-inspect"), *args], capture_output=True, text=True, timeout=120)
    if check is not None:
        assert p.returncode == check, (p.returncode, p.stdout, p.stderr)
    return p


def fill(pool, pages, space=1):
    subprocess.run([paths.tool("ppl-pool-bench"), "fill", "--pool", pool, "--pages", str(pages),
                    "--space", str(space)], check=True, capture_output=True, timeout=120)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def pool(tmp_path):
    path = str(tmp_path / "ppl.pool")
    inspect("pool", "create", path, "--identity", "/srv/datadir", "--size", "8M", check=0)
    return path


def sb_fields(path):
    with open(path, "rb") as f:
        sb = f.read(512)
    size, nblocks, dw_img_off, blocks_off = struct.unpack_from("<4Q", sb, 32)
    block_size = struct.unpack_from("<I", sb, 12)[0]
    return nblocks, blocks_off, block_size


def heads(path):
    """(offset, space, page) of every chain head, read the way pool_media.h lays blocks out."""
    nblocks, blocks_off, bs = sb_fields(path)
    out = []
    with open(path, "rb") as f:
        data = f.read()
    for b in range(1, nblocks):
        off = blocks_off + b * bs
        word = struct.unpack_from("<Q", data, off)[0]
        if (word >> 48) & 0xFF == 1:
            space, page = struct.unpack_from("<II", data, off + 8)
            out.append((off, space, page))
    return out


def test_create_refuses_overwrite_and_needs_identity(pool, tmp_path):
    before = digest(pool)
    p = inspect("pool", "create", pool, "--identity", "/other", check=2)
    assert "exists" in p.stderr and "never overwritten" in p.stderr
    assert digest(pool) == before
    p = inspect("pool", "create", str(tmp_path / "x.pool"), check=2)
    assert "--identity" in p.stderr
    p = inspect("pool", "create", str(tmp_path / "y.pool"), "--identity", "d", "--block-size", "48", check=2)
    assert "block size 48" in p.stderr
    assert not os.path.exists(tmp_path / "y.pool")


def test_info_check_dump(pool):
    fill(pool, 300)
    info = json.loads(inspect("pool", "info", pool, "--json", check=0).stdout)
    assert info["identity"] == "/srv/datadir"
    assert info["block_size"] == 64 and info["max_per_page"] == 256
    assert info["pages"] == 300
    assert sum(h["pages"] for h in info["pages_by_blocks"]) == 300
    assert info["blocks_used"] + info["blocks_free"] == info["blocks"]
    assert info["records"] > 300
    text = inspect("pool", "info", pool, check=0).stdout
    assert "300 with" in text and "/srv/datadir" in text
    chk = json.loads(inspect("pool", "check", pool, "--json", check=0).stdout)
    assert chk["ok"] and chk["pages"] == 300 and chk["damaged_pages"] == 0
    d = json.loads(inspect("pool", "dump", pool, "1:7", "--json", check=0).stdout)
    assert d["present"] and d["status"] == "ok" and d["records"]
    lsns = [r["start_lsn"] for r in d["records"]]
    assert lsns == sorted(lsns)
    assert all(r["bytes"] == "5c" * r["len"] for r in d["records"])
    missing = json.loads(inspect("pool", "dump", pool, "9:9", "--json", check=0).stdout)
    assert not missing["present"] and missing["records"] == []
    p = inspect("pool", "dump", pool, "seven", check=2)
    assert "SPACE:PAGE" in p.stderr


def test_flipped_bit_in_a_record_is_reported_not_served(pool):
    fill(pool, 50)
    off, space, page = heads(pool)[10]
    with open(pool, "r+b") as f:
        f.seek(off + 32 + 20)             # a record byte in the head's payload
        b = f.read(1)
        f.seek(off + 32 + 20)
        f.write(bytes([b[0] ^ 0x08]))
    before = digest(pool)
    p = inspect("pool", "check", pool, check=1)
    assert "PROBLEMS FOUND" in p.stdout
    assert f"page {space}:{page}" in p.stderr and "checksum" in p.stderr
    d = inspect("pool", "dump", pool, f"{space}:{page}", "--json", check=1)
    dj = json.loads(d.stdout)
    assert dj["status"] == "corrupt" and dj["records"] == []
    other = heads(pool)[11]
    inspect("pool", "dump", pool, f"{other[1]}:{other[2]}", check=0)
    assert digest(pool) == before, "a read-only look changed the pool"


def test_refused_pools(pool, tmp_path):
    inspect("pool", "check", pool, "--identity", "/srv/datadir", check=0)
    p = inspect("pool", "check", pool, "--identity", "/srv/other", check=2)
    assert 'belongs to "/srv/datadir"' in p.stderr
    with open(pool, "r+b") as f:             # a bit of the superblock's block count
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 0x01]))
    p = inspect("pool", "info", pool, check=2)
    assert "superblock is damaged" in p.stderr and "not opened" in p.stderr
    notpool = tmp_path / "random.bin"
    notpool.write_bytes(os.urandom(1 << 20))
    p = inspect("pool", "check", str(notpool), check=2)
    assert "not a PPL pool" in p.stderr
    good = str(tmp_path / "good.pool")
    inspect("pool", "create", good, "--identity", "d", "--size", "4M", check=0)
    os.truncate(good, 2 << 20)
    p = inspect("pool", "check", good, check=2)
    assert "truncated" in p.stderr
    p = inspect("pool", "info", str(tmp_path / "absent.pool"), check=2)
    assert "No such file" in p.stderr and "pool create" in p.stderr


def test_create_refuses_to_replace_an_undrained_pool(tmp_path):
    """An export whose marker (.ppl-pool) says its last pool was never
    drained by a clean stop gets no new, empty pool: the old one held the
    only copy of its kept pages. Once a clean stop drained it, or for a
    marker copied from another export, a new pool is made."""
    export = tmp_path / "export"
    export.mkdir()
    marker = export / ".ppl-pool"
    marker.write_text(f"export {export}\npool {'ab' * 16}\nstate open\n")
    p = inspect("pool", "create", str(tmp_path / "new.pool"), "--identity", str(export), "--size", "4M", check=2)
    assert "no clean stop drained" in p.stderr and "restore it from a backup" in p.stderr, p.stderr
    assert str(marker) in p.stderr
    assert not (tmp_path / "new.pool").exists()
    marker.write_text(f"export /elsewhere\npool {'ab' * 16}\nstate open\n")
    inspect("pool", "create", str(tmp_path / "copy.pool"), "--identity", str(export), "--size", "4M", check=0)
    marker.write_text(f"export {export}\npool {'ab' * 16}\nstate drained\n")
    inspect("pool", "create", str(tmp_path / "new.pool"), "--identity", str(export), "--size", "4M", check=0)
