/* Named crash points: the storage node killed at a chosen instant.
 *
 * SIGKILLs at random moments (tests/e2e/test_crash_ledger.py) rarely land
 * where a store goes wrong: between two durable steps of one change. So
 * the store names each instant where its durable state changes (the
 * pool, the doublewrite slots, the data files it materializes, its
 * restart point, the pool marker) or where an answer the client will
 * rely on is about to leave (a log WRITE's reply, an elision ACK, the
 * checkpoint gate's pass), and a test build can kill the process there,
 * at the Nth time the instant comes: PPL_CRASH_AT=<name>:<N> in the
 * environment of the process that loads the store. The process then
 * prints one line to stderr,
 *
 *     PPL crash point <name> hit <N>: killing the process (PPL_CRASH_AT)
 *
 * and raises SIGKILL, which leaves what a power loss of the compute side
 * and a crash of the storage process leave: what reached the file
 * system and the pool's mapping stays, nothing else runs.
 * scripts/crash-points.py drives a workload through every point in turn
 * and checks what survived; tests/e2e/test_crash_points.py runs a
 * subset.
 *
 * Compiled in only with -DPPL_CRASH_POINTS (CMake: the fsalppl_crash
 * plugin under build/ganesha-fsal-ppl/plugins-crash, which is neither
 * installed nor packaged). Elsewhere PPL_CRASH() is nothing, and the
 * names below are still known (ppl_crash_point_name) so that tools can
 * list them.
 *
 * A point's number counts every pass since the process started, on
 * every thread (a restart's own recovery included): (name, N) picks one
 * instant of a deterministic workload, not a time. An unknown name or a
 * malformed N in PPL_CRASH_AT stops the process at the first point with
 * a line that says so, rather than run a test that cannot crash. A
 * running process is armed again by ppl_crash_arm, counting from then. */
#ifndef PPL_CRASH_H
#define PPL_CRASH_H

#include <stddef.h>

/* X(ID, "name", "the instant") -- the names are the tests' vocabulary:
 * append, never rename. */
#define PPL_CRASH_POINT_LIST(X) \
	X(LOG_WRITTEN, "log_written", "a log WRITE is in ib_logfile0, not yet parsed; its reply not sent") \
	X(LOG_PARSED, "log_parsed", "a log WRITE is parsed and indexed; its reply not sent") \
	X(ELISION_ACK, "elision_ack", "an elision question is answered yes; the answer not yet sent") \
	X(PAGE_WRITE_TAKEN, "page_write_taken", "MariaDB's own page write is in its file and the page's " \
	  "records below it dropped; the reply not sent") \
	X(GATE_ENTER, "gate_enter", "the checkpoint gate begins: nothing settled; the checkpoint block not " \
	  "yet in the log file") \
	X(GATE_SETTLED, "gate_settled", "inside the checkpoint gate: one more elided page settled (pool or file)") \
	X(GATE_PASSED, "gate_passed", "the checkpoint gate passed; the checkpoint block not yet in the log file") \
	X(RESTART_ADVANCED, "restart_advanced", "the store's restart point moved forward, durably in the pool") \
	X(POOL_APPENDED, "pool_appended", "a record appended durably to a page's chain in the pool") \
	X(POOL_RECHAINED, "pool_rechained", "a page's new pool chain is durable; the old chain not yet freed") \
	X(DW_STAGED, "dw_staged", "a page image is durable in a doublewrite slot; its data file not written") \
	X(PAGE_WRITTEN, "page_written", "a materialized page is written to its data file, not yet synced") \
	X(PAGE_SYNCED, "page_synced", "a data file holding materialized pages is synced; their slots not released") \
	X(DW_RELEASED, "dw_released", "a doublewrite slot released; the page's records not yet dropped") \
	X(PAGE_SETTLED, "page_settled", "a materialized page's records dropped from the index and the pool") \
	X(CLEANER_PASS, "cleaner_pass", "the pool cleaner begins a pass (the pool below its low-water mark)") \
	X(SETTLE_AHEAD, "settle_ahead", "a worker begins settling elided pages half the log behind") \
	X(MARKER_WRITTEN, "marker_written", "the pool marker's new copy is synced, not yet renamed over the old") \
	X(DW_RESTORED, "dw_restored", "opening the pool wrote a doublewrite image back into its data file; " \
	  "the slot not yet released") \
	X(INGEST_STARTED, "ingest_started", "ingest started from MariaDB's checkpoint (a start or a restart)")

enum ppl_crash_point {
#define PPL_CRASH_ENUM(id, name, what) PPL_CRASH_##id,
	PPL_CRASH_POINT_LIST(PPL_CRASH_ENUM)
#undef PPL_CRASH_ENUM
	PPL_CRASH_POINT_COUNT
};

/* The point's name and what it is; NULL past the list. */
const char *ppl_crash_point_name(enum ppl_crash_point p);
const char *ppl_crash_point_what(enum ppl_crash_point p);

/* Arms the point named in spec ("<name>:<N>"): the Nth pass from now
 * kills, replacing what was armed before. The live socket's request
 * "crash-at <name>:<N>" calls it (a driver arms the next point without
 * a restart). 0, or -1 with why in err: a malformed spec, an unknown
 * name, or a build without crash points. */
int ppl_crash_arm(const char *spec, char *err, size_t errlen);

#ifdef PPL_CRASH_POINTS
void ppl_crash_point(enum ppl_crash_point p);
/* One whole line to stderr with write(2): no stdio buffer a SIGKILL
 * could lose (the fault switch's lines too, ppl/fault.h). */
void ppl_crash_say(const char *line);
#define PPL_CRASH(id) ppl_crash_point(PPL_CRASH_##id)
#else
#define PPL_CRASH(id) ((void)0)
#endif

#endif
