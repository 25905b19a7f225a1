/* Applying MariaDB 10.8+ ("Phys") redo records to one page image, with the
 * rules of InnoDB's recovery (log0recv.cc: log_phys_t::apply and
 * recv_recover_page). */
#ifndef PPL_PAGE_APPLY_H
#define PPL_PAGE_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ppl_apply_status {
	PPL_APPLY_OK = 0,
	/* The record is malformed or does not fit the page (recovery would
	 * call this corruption). */
	PPL_APPLY_CORRUPT,
	/* A record type or page kind we do not rebuild (e.g.
	 * ROW_FORMAT=COMPRESSED); never guessed, the caller keeps the page
	 * for full page writes. */
	PPL_APPLY_UNSUPPORTED,
	/* The page the records would apply to fails its checksum (torn by a
	 * partial write, or bytes changed by a tool) and the log does not
	 * initialize it: recovery would not apply redo to it either (it
	 * restores such a page from the doublewrite buffer or reports it
	 * corrupted). Nothing the records make of it is that page. */
	PPL_APPLY_BASE_DAMAGED,
};

/* "corrupt", "unsupported", "damaged page" (for messages) */
const char *ppl_apply_status_name(enum ppl_apply_status s);

/* Why an apply failed: enough to log page id, page type and record. */
struct ppl_apply_error {
	uint8_t rec_type;     /* first byte & 0x70, or a FILE_ type */
	int ext_subtype;      /* EXTENDED subtype, -1 if none */
	uint32_t rec_offset;  /* offset of the record within the chunk */
	char msg[160];
};

/* The page a chunk of records is applied to. */
struct ppl_page_ref {
	uint8_t *frame;
	size_t size;          /* physical page size: 4096..65536, a power of two; others are
	                       * PPL_APPLY_UNSUPPORTED */
	uint32_t space_id;
	uint32_t page_no;
};

/* State carried across the records of one page within one apply pass, as
 * page_recv_t::last_offset is in InnoDB. */
struct ppl_apply_cursor {
	uint32_t last_offset; /* 1 = no same_page record may follow */
};

/*
 * Applies one mini-transaction's records for one page: `recs` holds them in
 * MariaDB's own encoding, exactly as log_phys_t stores them: each run of
 * records starts with one carrying the page id, the rest of the run has the
 * same_page bit. Returns PPL_APPLY_OK and sets *modified when the page
 * changed (FREE_PAGE alone modifies nothing).
 */
enum ppl_apply_status ppl_apply_mtr_recs(const struct ppl_page_ref *pg, struct ppl_apply_cursor *cur,
					 const uint8_t *recs, size_t len, bool *modified,
					 struct ppl_apply_error *err);

/*
 * EXTENDED records (mrec_ext_t). `body` starts at the subtype byte and has
 * `len` >= 1 bytes (the record's payload after its page id). Implemented in
 * page_ext.c: B-tree page creation, undo page init and append, record
 * insert and delete in both row formats. TRIM_PAGES is a file operation and
 * never reaches here.
 */
enum ppl_apply_status ppl_apply_extended(const struct ppl_page_ref *pg, const uint8_t *body, size_t len,
					 struct ppl_apply_error *err);

/*
 * The recovery of one page (recv_recover_page): feed the page's
 * mini-transactions in LSN order, then finish.
 */
struct ppl_page_replay {
	struct ppl_page_ref pg;
	struct ppl_apply_cursor cur;
	uint64_t page_lsn;    /* LSN the page had before replay; 0 if initialized by the log */
	uint64_t init_lsn;
	uint64_t start_lsn;   /* first applied mtr since the page was last freed (a resumed image's LSN); 0 = none */
	uint64_t end_lsn;     /* end LSN of the last mtr seen */
	unsigned applied;     /* mtrs applied */
	unsigned skipped;     /* mtrs skipped by the LSN rule */
	bool damaged;         /* the stored page fails its checksum (PPL_APPLY_BASE_DAMAGED) */
};

/* init_lsn: start LSN of the last INIT_PAGE/FREE_PAGE the log holds for
 * this page (0 if none). Then the page's stored contents and LSN are not
 * trusted and mtrs before init_lsn are skipped (recv_init in InnoDB);
 * otherwise mtrs that started before the page's LSN are skipped, and a
 * stored page that is neither all zeros (never written) nor passes its
 * checksum takes no mtr: ppl_replay_mtr returns PPL_APPLY_BASE_DAMAGED
 * for the first one it would apply. */
void ppl_replay_begin(struct ppl_page_replay *r, const struct ppl_page_ref *pg, uint64_t init_lsn);
/* Goes on from a page this replay's rules produced earlier from the same
 * base and the same records, up to its LSN (an image the caller kept):
 * the state a replay is in after those records, so that only the
 * mini-transactions after them are applied and the result is the one a
 * replay from the base would give. The image is the replay's own work,
 * not a stored page: it is not checked for damage. */
void ppl_replay_resume(struct ppl_page_replay *r, const struct ppl_page_ref *pg, uint64_t init_lsn);
enum ppl_apply_status ppl_replay_mtr(struct ppl_page_replay *r, uint64_t mtr_start_lsn, uint64_t mtr_end_lsn,
				     const uint8_t *recs, size_t len, struct ppl_apply_error *err);
/* Stamps LSN and checksum if anything was applied; returns whether the page
 * must be written (false: unchanged, or left freed). */
bool ppl_replay_finish(struct ppl_page_replay *r);

#endif
