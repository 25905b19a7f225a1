/* libFuzzer target: arbitrary bytes as the record area of a redo log with
 * a valid header and checkpoint, fed in pieces whose sizes also come from
 * the input; every emitted mini-transaction is decoded record by record.
 * The reader must never emit an mtr that fails its CRC, never read out of
 * bounds, and never crash. */
#include <stdlib.h>
#include <string.h>

#include "ppl/crc32c.h"
#include "ppl/mach.h"
#include "ppl/redo.h"

static int on_mtr(void *arg, const struct ppl_mtr *m)
{
	(void)arg;
	/* The CRC the reader checked must hold for what it hands out. */
	if (m->end_lsn - m->start_lsn != m->len + 5)
		abort();
	struct ppl_rec_iter it;
	struct ppl_rec r;
	ppl_rec_iter_init(&it, m->recs, m->len, 16384);
	while (ppl_rec_next(&it, &r) > 0)
		if (r.raw + r.raw_len > m->recs + m->len || (r.body && r.body + r.body_len > m->recs + m->len))
			abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const size_t cap = 4096;
	size_t fsize = 12288 + cap;
	uint8_t *file = calloc(1, fsize);
	ppl_wr4(file, 0x50687973u);
	ppl_wr8(file + 8, 12288);
	ppl_wr4(file + 508, ppl_crc32c(0, file, 508));
	uint8_t *ck = file + 4096;
	ppl_wr8(ck, 12288);
	ppl_wr8(ck + 8, 12288 + (data[0] % 64));
	ppl_wr4(ck + 60, ppl_crc32c(0, ck, 60));
	size_t chunk = 1 + data[1] % 200;
	data += 2;
	size -= 2;
	struct ppl_redo_sink sink = {.on_mtr = on_mtr};
	struct ppl_redo_reader *r = ppl_redo_reader_new(&ppl_dialect_mariadb_10_8, fsize, PPL_REDO_WRITES, &sink);
	ppl_redo_feed(r, 0, file, 12288);
	/* The input is written over the circular area, possibly wrapping. */
	size_t off = 12288;
	for (size_t i = 0; i < size; i += chunk) {
		size_t n = size - i < chunk ? size - i : chunk;
		if (n > fsize - off)
			n = fsize - off;
		ppl_redo_feed(r, off, data + i, n);
		off += n;
		if (off == fsize)
			off = 12288;
		if (n < chunk && i + n < size)
			i -= chunk - n; /* continue after the wrap */
	}
	ppl_redo_finish(r);
	ppl_redo_reader_free(r);
	free(file);
	return 0;
}
