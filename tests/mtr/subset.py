"""The CI subset of MariaDB's `innodb` and `innodb_zip` mtr suites.

Names are as mtr takes them: suite.test[,combination...]. A test with
combinations runs only in the one named here (mtr would otherwise run every
combination: page sizes, checksum algorithms, row formats). Every test here
passes on a local datadir with Debian's release build as root (tests that
need a debug build, and `innodb.restart`, which skips as root, are not
chosen), and that take at most about 45 s over ppl-mount with stock
FSAL_VFS (set-up e): tests with hundreds of DROP TABLEs cost minutes there
(tests/mtr/README.md lists the ones left out for time, and why each test
that is not here is not).
"""
import re

# (test, what it covers)
CHOSEN = [
    # DDL and instant ALTER
    ("innodb.instant_drop", "instant DROP COLUMN"),
    ("innodb.alter_table", "ALTER TABLE regressions, DISCARD + ALTER"),
    ("innodb.alter_algorithm,COPY", "ALGORITHM=COPY (#sql intermediate tables)"),
    ("innodb.rename_table", "RENAME TABLE, with a restart"),
    ("innodb.truncate", "TRUNCATE TABLE"),
    # IMPORT/EXPORT
    ("innodb.innodb-wl5522,strict_full_crc32", "FLUSH FOR EXPORT, DISCARD, IMPORT TABLESPACE"),
    ("innodb.innodb-wl5522-1", "IMPORT TABLESPACE across schemas and row formats"),
    ("innodb.import_cfg", "IMPORT with and without .cfg"),
    ("innodb.instant_alter_import,strict_full_crc32", "IMPORT into instantly altered tables"),
    ("innodb_zip.wl5522_zip,16k", "IMPORT of ROW_FORMAT=COMPRESSED tables"),
    # temporary tables
    ("innodb.temp_table", "CREATE TEMPORARY TABLE"),
    ("innodb.innodb", "the general InnoDB test; its CREATE TEMPORARY TABLE with an AUTO_INCREMENT key fails "
                      "under libcatcher even on a local datadir (issue 15, item 2)"),
    ("innodb.temp_table_savepoint,dynamic", "temporary tables and savepoints"),
    ("innodb.temporary_table_optimization", "temporary table DML"),
    # BLOBs
    ("innodb_zip.blob,16k", "BLOBs in compressed tables"),
    ("innodb.blob_cmp_empty,dynamic", "empty BLOB comparisons"),
    ("innodb.innodb-enlarge-blob", "BLOBs enlarged across pages"),
    ("innodb.blob-crash,16k", "BLOB writes with a server killed"),
    # undo tablespaces, truncation, purge
    ("innodb.undo_truncate,16k", "innodb_undo_log_truncate with undo tablespaces"),
    ("innodb.undo_upgrade,16k", "innodb_undo_tablespaces changed across restarts"),
    ("innodb.undo_log", "undo log records"),
    ("innodb.purge", "purge"),
    ("innodb.purge_secondary", "purge of secondary indexes"),
    ("innodb.instant_alter_purge,release", "purge after instant ALTER"),
    # page sizes 4K..64K
    ("innodb.innodb-64k", "64 KiB pages"),
    ("innodb.innodb-64k-crash,dynamic", "64 KiB pages, server killed"),
    ("innodb.innodb-32k", "32 KiB pages"),
    ("innodb.innodb-32k-crash", "32 KiB pages, server killed"),
    ("innodb_zip.index_large_prefix_4k", "4 KiB pages"),
    ("innodb_zip.index_large_prefix_8k", "8 KiB pages"),
    # foreign keys
    ("innodb.fk_col_alter", "ALTER of foreign key columns"),
    ("innodb.innodb-fkcheck", "FOREIGN_KEY_CHECKS=0 and dropped parents"),
    ("innodb.stored_fk", "foreign keys on stored generated columns"),
    ("innodb.foreign_sql_mode,COPY,STRICT", "foreign keys under ALTER ... COPY in strict mode"),
    # row formats
    ("innodb.default_row_format_create,dynamic", "innodb_default_row_format"),
    # ROW_FORMAT=COMPRESSED and page_compressed
    ("innodb_zip.innodb-zip,16k", "ROW_FORMAT=COMPRESSED"),
    ("innodb_zip.cmp_drop_table,16k", "dropping compressed tables"),
    ("innodb.innodb_page_compressed,zlib", "PAGE_COMPRESSED=1"),
    ("innodb.innodb-page_compression_none,strict_full_crc32", "page compression none"),
    # the server killed and restarted
    ("innodb.alter_kill,strict_full_crc32", "server killed, corrupted page handling"),
    ("innodb_zip.recover,16k", "crash recovery of compressed tables"),
    ("innodb.doublewrite,16k,strict_full_crc32", "doublewrite buffer recovery after a kill"),
    ("innodb.log_file_name", "duplicate and missing tablespaces at recovery, RENAME before a kill"),
    ("innodb.trx_id_future,strict_full_crc32", "a page edited in place by a tool at its own LSN"),
    ("innodb.read_only_recovery", "recovery in read-only mode"),
    ("innodb.recovery_shutdown", "shutdown during recovery"),
    ("innodb.xa_recovery", "XA PREPARE across a kill"),
]

# Chosen tests that pass on a local datadir but not yet over the stack in
# every set-up CI runs them in (SUBSET_REPORT.md). Ours, open; not in CI
# until fixed, run by `scripts/mtr-stack.py --subset open`. (innodb.alter_kill
# and innodb.instant_drop left on 2026-11-26: verify mode took alter_kill's
# page overwritten on purpose for a divergence; instant_drop's divergence
# has not come back since the identity fixes; innodb.doublewrite
# 16k,strict_full_crc32 on 2026-11-28: its skips in d came from the harness's
# pool on disk, tests/mtr/README.md.) Empty today.
OPEN = {}
CI = [name for name, _ in CHOSEN if name not in OPEN]

# The part of CI that runs eliding (set-up d) in the suite, within its time
# budget (about 6 minutes): the tests that found this stack's wrong
# answers in eliding mode -- datadirs of other page sizes removed and
# copied or bootstrapped again in place (the 64K and 32K tests, the first
# test after them; innodb-32k then innodb-32k-crash reuse table names
# across two datadirs), undo tablespaces truncated and re-created, .ibd
# files copied for IMPORT, servers killed and restarted. All of CI passes
# in d (SUBSET_REPORT.md); PPL_MTR_SETUPS=a,c,d runs all of it in d.
ELIDING = [
    "innodb.innodb-64k",
    "innodb.innodb-32k",
    "innodb.innodb-32k-crash",
    "innodb.blob-crash,16k",
    "innodb.instant_alter_purge,release",
    "innodb.undo_truncate,16k",
    "innodb.undo_upgrade,16k",
    "innodb.innodb-wl5522,strict_full_crc32",
    "innodb.instant_alter_import,strict_full_crc32",
    "innodb.import_cfg",
    "innodb_zip.wl5522_zip,16k",
    "innodb.trx_id_future,strict_full_crc32",
    "innodb.rename_table",
    "innodb.recovery_shutdown",
    "innodb.read_only_recovery",
    # they sample MariaDB's checkpoint right after a flush and skip
    # themselves if it moves later: they skipped in d while the harness kept
    # the pool on disk (tests/mtr/README.md, "Extra checkpoint")
    "innodb.log_file_name",
    "innodb.alter_kill,strict_full_crc32",
    "innodb.doublewrite,16k,strict_full_crc32",
]


def split(name):
    """("suite.test", {combinations}) from "suite.test,c1,c2" (as given to
    mtr) or "suite.test 'c1,c2'" (as mtr reports it)."""
    m = re.match(r"^(\S+?) '([^']*)'$", name)
    if m:
        return m.group(1), set(m.group(2).split(","))
    base, *combos = name.split(",")
    return base, set(combos)


def find(run, name):
    """The result in run (a runner.RunResult) of the test named as in CI."""
    base, combos = split(name)
    for n, t in run.tests.items():
        b, c = split(n.replace(" (again)", ""))
        if b == base and combos <= c:
            return t
    return None
