/* One logger for every part of the storage node that has something to
 * say: the store, the node, the pool, the elision service. The library
 * never writes to a file or to stderr itself; its host gives a logger
 * (ganesha.nfsd maps the levels onto its own log; a test collects the
 * lines; a tool prints them). Messages are whole sentences that say what
 * happened and what to do; the level says how urgent. */
#ifndef PPL_LOG_H
#define PPL_LOG_H

#include <stdbool.h>

enum ppl_log_level {
	PPL_LOG_CRIT,   /* data is at risk or a service stopped: someone must act */
	PPL_LOG_WARN,   /* something was refused or went around a problem */
	PPL_LOG_EVENT,  /* a state change an operator wants in the log */
	PPL_LOG_INFO,
	PPL_LOG_DEBUG,  /* per-operation detail, off by default */
};

struct ppl_logger {
	/* func and line: where the message was made (hosts that show it, as
	 * Ganesha does, show the library's function, not their adapter's). */
	void (*log)(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg);
	/* Whether a level is wanted at all (NULL: all are); asked before a
	 * message is formatted. */
	bool (*enabled)(void *arg, enum ppl_log_level level);
	void *arg;
};

/* Formats and hands one message to the logger; nothing when the logger
 * has no log function or does not want the level. */
void ppl_logf(const struct ppl_logger *l, enum ppl_log_level level, const char *func, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#define PPL_LOG(l, level, ...) ppl_logf((l), (level), __func__, __LINE__, __VA_ARGS__)

/* Short name of a level ("CRIT", ...), for hosts that print it. */
const char *ppl_log_level_name(enum ppl_log_level level);

#endif
