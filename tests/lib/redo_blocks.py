"""Blocks of MariaDB's redo log (10.8+ format, described in
applier/src/redo_mariadb.c) that tests write themselves, as the server
would: a checkpoint block says "my log is durable up to end_lsn", the
evidence on which the storage node calls a stall in the log damage."""
import struct

_CASTAGNOLI = 0x82F63B78
_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ _CASTAGNOLI if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    """CRC-32C, as InnoDB checksums its log blocks (the stdlib has only
    zlib's CRC-32)."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def checkpoint_block(lsn, end_lsn):
    """The 64-byte checkpoint block (file offset 4096 or 8192): checkpoint
    LSN, the LSN the log was flushed to when it was written, CRC-32C."""
    body = struct.pack(">QQ", lsn, end_lsn) + bytes(44)
    return body + struct.pack(">I", crc32c(body))


def header_first_lsn(log):
    """The first LSN of a log file's record area (12288), from its header."""
    return struct.unpack(">Q", log[8:16])[0]


def newest_checkpoint(log):
    """(checkpoint LSN, end LSN, offset) of the newer of the two blocks."""
    best = None
    for off in (4096, 8192):
        lsn, end = struct.unpack(">QQ", log[off:off + 16])
        if crc32c(log[off:off + 60]) == struct.unpack(">I", log[off + 60:off + 64])[0] and \
                (best is None or lsn > best[0]):
            best = (lsn, end, off)
    return best
