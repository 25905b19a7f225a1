"""A minimal synchronous NFSv3 client over libnfs (ctypes), for tests that
need what nfs-cp/nfs-cat cannot do: writes and reads at arbitrary offsets,
fsync (COMMIT), rename, unlink, mkdir, links.  Paths are relative to the
export; the URL comes from Ganesha.url() and names both ports."""
import ctypes
import ctypes.util
import os

_lib = ctypes.CDLL(ctypes.util.find_library("nfs") or "libnfs.so.13", use_errno=True)


class _Url(ctypes.Structure):
    _fields_ = [("server", ctypes.c_char_p), ("path", ctypes.c_char_p), ("file", ctypes.c_char_p)]


_P = ctypes.c_void_p
_lib.nfs_init_context.restype = _P
_lib.nfs_destroy_context.argtypes = [_P]
_lib.nfs_get_error.restype = ctypes.c_char_p
_lib.nfs_get_error.argtypes = [_P]
_lib.nfs_parse_url_dir.restype = ctypes.POINTER(_Url)
_lib.nfs_parse_url_dir.argtypes = [_P, ctypes.c_char_p]
_lib.nfs_destroy_url.argtypes = [ctypes.POINTER(_Url)]
_lib.nfs_mount.argtypes = [_P, ctypes.c_char_p, ctypes.c_char_p]
_lib.nfs_open2.argtypes = [_P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_P)]
_lib.nfs_close.argtypes = [_P, _P]
_lib.nfs_pwrite.argtypes = [_P, _P, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p]
_lib.nfs_pread.argtypes = [_P, _P, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p]
_lib.nfs_fsync.argtypes = [_P, _P]
_lib.nfs_ftruncate.argtypes = [_P, _P, ctypes.c_uint64]
for _name in ("nfs_mkdir", "nfs_rmdir", "nfs_unlink"):
    getattr(_lib, _name).argtypes = [_P, ctypes.c_char_p]
for _name in ("nfs_rename", "nfs_link", "nfs_symlink"):
    getattr(_lib, _name).argtypes = [_P, ctypes.c_char_p, ctypes.c_char_p]
_lib.nfs_readlink.argtypes = [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]


class NfsError(OSError):
    pass


class Client:
    def __init__(self, url):
        self.ctx = _lib.nfs_init_context()
        if not self.ctx:
            raise NfsError("nfs_init_context failed")
        u = _lib.nfs_parse_url_dir(self.ctx, url.encode())
        if not u:
            self._fail(f"parse {url}")
        try:
            self._check(_lib.nfs_mount(self.ctx, u.contents.server, u.contents.path),
                        f"mount {url}")
        finally:
            _lib.nfs_destroy_url(u)

    def _fail(self, what, rc=None):
        msg = (_lib.nfs_get_error(self.ctx) or b"").decode(errors="replace")
        err = NfsError(f"{what}: {msg} ({rc})")
        err.errno = -rc if rc and rc < 0 else None
        raise err

    def _check(self, rc, what):
        if rc < 0:
            self._fail(what, rc)
        return rc

    def close(self):
        if self.ctx:
            _lib.nfs_destroy_context(self.ctx)
            self.ctx = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _p(path):
        return ("/" + path.lstrip("/")).encode()

    def open(self, path, flags=os.O_RDWR, mode=0o644):
        fh = _P()
        self._check(_lib.nfs_open2(self.ctx, self._p(path), flags, mode, ctypes.byref(fh)), f"open {path}")
        return fh

    def close_file(self, fh):
        self._check(_lib.nfs_close(self.ctx, fh), "close")

    def pwrite(self, fh, data, offset):
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        n = self._check(_lib.nfs_pwrite(self.ctx, fh, offset, len(data), buf), f"pwrite at {offset}")
        if n != len(data):
            raise NfsError(f"short write at {offset}: {n} of {len(data)}")
        return n

    def pread(self, fh, count, offset):
        buf = ctypes.create_string_buffer(count)
        n = self._check(_lib.nfs_pread(self.ctx, fh, offset, count, buf), f"pread at {offset}")
        return buf.raw[:n]

    def pread_full(self, fh, count, offset):
        """pread until `count` bytes or end of file (one READ is capped at rsize)."""
        out = bytearray()
        while len(out) < count:
            chunk = self.pread(fh, count - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def fsync(self, fh):
        self._check(_lib.nfs_fsync(self.ctx, fh), "fsync")

    def ftruncate(self, fh, length):
        self._check(_lib.nfs_ftruncate(self.ctx, fh, length), "ftruncate")

    def write_file(self, path, data):
        fh = self.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        try:
            if data:
                self.pwrite(fh, data, 0)
            self.fsync(fh)
        finally:
            self.close_file(fh)

    def read_file(self, path, chunk=1 << 20):
        fh = self.open(path, os.O_RDONLY)
        out = bytearray()
        try:
            while True:
                piece = self.pread(fh, chunk, len(out))
                if not piece:
                    return bytes(out)
                out += piece
        finally:
            self.close_file(fh)

    def mkdir(self, path):
        self._check(_lib.nfs_mkdir(self.ctx, self._p(path)), f"mkdir {path}")

    def rmdir(self, path):
        self._check(_lib.nfs_rmdir(self.ctx, self._p(path)), f"rmdir {path}")

    def unlink(self, path):
        self._check(_lib.nfs_unlink(self.ctx, self._p(path)), f"unlink {path}")

    def rename(self, old, new):
        self._check(_lib.nfs_rename(self.ctx, self._p(old), self._p(new)), f"rename {old} {new}")

    def link(self, old, new):
        self._check(_lib.nfs_link(self.ctx, self._p(old), self._p(new)), f"link {old} {new}")

    def symlink(self, target, path):
        self._check(_lib.nfs_symlink(self.ctx, target.encode(), self._p(path)), f"symlink {path}")

    def readlink(self, path):
        buf = ctypes.create_string_buffer(4096)
        self._check(_lib.nfs_readlink(self.ctx, self._p(path), buf, 4096), f"readlink {path}")
        return buf.value.decode()
