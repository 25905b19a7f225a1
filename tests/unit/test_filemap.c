/* The fileid -> space map: answers, replacement, removal, growth past any
 * fixed size (a long-lived datadir creates and drops files without end),
 * and lookups that run while other threads add and remove. */
#include <pthread.h>
#include <stdint.h>

#include "check.h"
#include "ppl/filemap.h"

#define CHURN 200000u

struct reader_arg {
	struct ppl_filemap *m;
	volatile int *stop;
	unsigned long wrong;
};

/* Fileids 1..1000 always hold space fileid+7; lookups of them must never
 * fail or answer otherwise while the writer churns other fileids. */
static void *reader(void *p)
{
	struct reader_arg *a = p;
	uint64_t id = 1;
	while (!__atomic_load_n(a->stop, __ATOMIC_RELAXED)) {
		uint32_t space;
		if (!ppl_filemap_get(a->m, id, &space) || space != id + 7)
			a->wrong++;
		id = id % 1000 + 1;
	}
	return NULL;
}

int main(void)
{
	struct ppl_filemap *m = ppl_filemap_new();
	CHECK(m != NULL);
	uint32_t space = 0;

	CHECK(!ppl_filemap_get(m, 42, &space));
	CHECK_EQ_U(ppl_filemap_set(m, 42, 5), 1);
	CHECK_EQ_U(ppl_filemap_set(m, 42, 5), 0); /* already known */
	CHECK(ppl_filemap_get(m, 42, &space));
	CHECK_EQ_U(space, 5);
	CHECK_EQ_U(ppl_filemap_set(m, 42, 9), 1); /* the inode now holds another space */
	CHECK(ppl_filemap_get(m, 42, &space));
	CHECK_EQ_U(space, 9);
	CHECK_EQ_U(ppl_filemap_count(m), 1);

	/* a removed file's inode number, reused, is unknown */
	space = 0;
	CHECK(ppl_filemap_remove(m, 42, &space));
	CHECK_EQ_U(space, 9);
	CHECK(!ppl_filemap_get(m, 42, &space));
	CHECK(!ppl_filemap_remove(m, 42, NULL));
	CHECK_EQ_U(ppl_filemap_count(m), 0);

	/* far more files than any fixed table held, created and removed in
	 * turn: every answer stays right and nothing is left behind */
	for (uint64_t id = 1; id <= CHURN; id++) {
		CHECK_EQ_U(ppl_filemap_set(m, id * 4099, (uint32_t)id), 1);
		if (id > 64) {
			uint32_t old = 0;
			CHECK(ppl_filemap_remove(m, (id - 64) * 4099, &old));
			CHECK_EQ_U(old, id - 64);
		}
	}
	CHECK_EQ_U(ppl_filemap_count(m), 64);
	for (uint64_t id = CHURN - 63; id <= CHURN; id++)
		CHECK(ppl_filemap_get(m, id * 4099, &space) && space == id);
	CHECK(!ppl_filemap_get(m, 4099, &space));
	ppl_filemap_clear(m);
	CHECK_EQ_U(ppl_filemap_count(m), 0);
	CHECK(!ppl_filemap_get(m, CHURN * 4099, &space));

	/* readers of stable entries while a writer adds, replaces and
	 * removes others */
	for (uint64_t id = 1; id <= 1000; id++)
		ppl_filemap_set(m, id, (uint32_t)id + 7);
	volatile int stop = 0;
	struct reader_arg args[2] = {{m, &stop, 0}, {m, &stop, 0}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, reader, &args[i]) == 0);
	for (uint64_t round = 0; round < 20; round++) {
		for (uint64_t id = 1000000; id < 1005000; id++)
			ppl_filemap_set(m, id, (uint32_t)(id + round));
		for (uint64_t id = 1000000; id < 1005000; id++)
			CHECK(ppl_filemap_remove(m, id, NULL));
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ_U(args[i].wrong, 0);
	}
	CHECK_EQ_U(ppl_filemap_count(m), 1000);
	ppl_filemap_free(m);
	CHECK_DONE();
}
