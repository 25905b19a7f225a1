/* Start-up and shutdown of libcatcher inside the host. Init runs from our
 * constructor or from the first wrapper called before it, whichever comes
 * first, exactly once; while it runs, wrappers called from inside it (by
 * dlsym, realpath, getenv...) forward to the system call directly. */
#include "catcher.h"
#include "uring_defer.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

volatile int catcher_inited;
__thread int catcher_busy __attribute__((tls_model("initial-exec")));

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void after_fork_child(void)
{
	catcher_fd_after_fork();
	catcher_client_after_fork();
	catcher_stats_after_fork();
	catcher_devnull_after_fork();
	defer_after_fork();
}

static void do_init(void)
{
	catcher_busy++;
	catcher_resolve_all();
	catcher_config_load();
	if (catcher_cfg.mode != CATCHER_OFF) {
		catcher_fd_init();
		catcher_client_init();
		catcher_stats_init();
		pthread_atfork(NULL, NULL, after_fork_child);
		static const char *const modes[] = {"off", "passthrough", "elide"};
		if (catcher_cfg.mode == CATCHER_ELIDE)
			catcher_log("mode elide, server %s:%s, timeout %d ms, %u connection(s), data directory %s%s",
				    catcher_cfg.server_host, catcher_cfg.server_port, catcher_cfg.timeout_ms,
				    catcher_cfg.connections, catcher_cfg.ndatadirs ? catcher_cfg.datadirs[0] : "(none)",
				    catcher_cfg.ndatadirs > 1 ? " and more" : "");
		else
			catcher_log("mode %s: writes are counted, never elided", modes[catcher_cfg.mode]);
	}
	__atomic_store_n(&catcher_inited, 1, __ATOMIC_RELEASE);
	catcher_busy--;
}

void catcher_init(void)
{
	if (catcher_busy) {
		/* Re-entered from our own init (e.g. dlsym opening a file):
		 * the caller forwards; the real pointers may still be NULL. */
		return;
	}
	pthread_once(&once, do_init);
}

__attribute__((constructor)) static void catcher_ctor(void)
{
	catcher_init();
}

__attribute__((destructor)) static void catcher_dtor(void)
{
	if (catcher_inited && catcher_cfg.mode != CATCHER_OFF)
		catcher_stats_dump();
}
