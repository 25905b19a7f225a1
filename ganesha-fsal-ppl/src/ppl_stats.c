/* The periodic stats line (every Stats_Interval seconds) and the final one
 * at unexport: I/O on InnoDB's files by class, then the engine's figures. */
#include "ppl_fsal.h"

#include <time.h>

void ppl_stats_log(struct ppl_export *pexp, const char *when)
{
	struct ppl_hook_counts c;
	char line[2048], engine[1536];

	ppl_hooks_snapshot(pexp->hooks, &c);
	ppl_hook_counts_format(&c, line, sizeof(line));
	ppl_hooks_engine_format(pexp->hooks, engine, sizeof(engine));
	LogEvent(COMPONENT_FSAL, "PPL: stats %s for %s: %s | %s", when, pexp->fullpath, line, engine);
	if (ppl_hooks_pool_format(pexp->hooks, engine, sizeof(engine)) > 0)
		LogEvent(COMPONENT_FSAL, "PPL: pool stats %s for %s: %s", when, pexp->fullpath, engine);
	if (ppl_hooks_archive_format(pexp->hooks, engine, sizeof(engine)) > 0)
		LogEvent(COMPONENT_FSAL, "PPL: archive stats %s for %s: %s", when, pexp->fullpath, engine);
}

static void *stats_main(void *arg)
{
	struct ppl_export *pexp = arg;
	struct timespec deadline;

	SetNameFunction("ppl_stats");
	pthread_mutex_lock(&pexp->stats_lock);
	clock_gettime(CLOCK_REALTIME, &deadline);
	while (!pexp->stopping) {
		deadline.tv_sec += pexp->cfg.stats_interval;
		while (!pexp->stopping &&
		       pthread_cond_timedwait(&pexp->stats_cond, &pexp->stats_lock, &deadline) == 0)
			;
		if (pexp->stopping)
			break;
		pthread_mutex_unlock(&pexp->stats_lock);
		ppl_stats_log(pexp, "periodic");
		pthread_mutex_lock(&pexp->stats_lock);
	}
	pthread_mutex_unlock(&pexp->stats_lock);
	return NULL;
}

void ppl_stats_start(struct ppl_export *pexp)
{
	int rc;

	if (pexp->cfg.stats_interval == 0)
		return;
	rc = pthread_create(&pexp->stats_thread, NULL, stats_main, pexp);
	if (rc != 0) {
		LogWarn(COMPONENT_FSAL, "PPL: export %s: no periodic stats line (thread: %s); the export "
			"works, the figures are still logged at unexport", pexp->fullpath, strerror(rc));
		return;
	}
	pexp->stats_running = true;
}

void ppl_stats_stop(struct ppl_export *pexp)
{
	if (!pexp->stats_running)
		return;
	pthread_mutex_lock(&pexp->stats_lock);
	pexp->stopping = true;
	pthread_cond_signal(&pexp->stats_cond);
	pthread_mutex_unlock(&pexp->stats_lock);
	pthread_join(pexp->stats_thread, NULL);
	pexp->stats_running = false;
}
