/* Named crash points (ppl/crash.h), built here with PPL_CRASH_POINTS as the
 * test plugin is: a point kills the process at exactly its Nth pass and
 * never before, other points do not count towards it, arming at run time
 * counts from then, and a wrong PPL_CRASH_AT stops the process with a
 * line that says so instead of running a test that can never crash.
 * Each case runs in a child process, since the point of a point is to
 * kill its process. */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ppl/crash.h"

struct outcome {
	int status;                    /* waitpid's */
	unsigned passes;               /* passes of the armed point the child reported before it died */
	char err[512];                 /* its stderr */
};

/* Runs body in a child with PPL_CRASH_AT=env (NULL: unset); the child
 * writes one byte to fd 3 per pass it completes. */
static struct outcome run(const char *env, void (*body)(void))
{
	struct outcome o = { 0 };
	int passes[2], err[2];
	if (pipe(passes) != 0 || pipe(err) != 0)
		abort();
	pid_t pid = fork();
	if (pid == 0) {
		close(passes[0]);
		close(err[0]);
		dup2(passes[1], 3);
		dup2(err[1], 2);
		if (env)
			setenv("PPL_CRASH_AT", env, 1);
		else
			unsetenv("PPL_CRASH_AT");
		body();
		_exit(0);
	}
	close(passes[1]);
	close(err[1]);
	char b[64];
	ssize_t n;
	while ((n = read(passes[0], b, sizeof b)) > 0)
		o.passes += (unsigned)n;
	size_t got = 0;
	while ((n = read(err[0], o.err + got, sizeof o.err - 1 - got)) > 0)
		got += (size_t)n;
	o.err[got] = '\0';
	close(passes[0]);
	close(err[0]);
	waitpid(pid, &o.status, 0);
	return o;
}

static void pass(void)
{
	if (write(3, "x", 1) != 1)
		_exit(3);
}

/* 10 passes of gate_settled, each interleaved with passes of two other
 * points that must not count. */
static void ten_settled(void)
{
	for (int i = 0; i < 10; i++) {
		PPL_CRASH(LOG_WRITTEN);
		PPL_CRASH(GATE_SETTLED);
		pass();
		PPL_CRASH(PAGE_WRITTEN);
	}
}

/* 5 passes of page_written, then armed at run time for the 2nd from then. */
static void armed_late(void)
{
	char msg[200];
	for (int i = 0; i < 5; i++) {
		PPL_CRASH(PAGE_WRITTEN);
		pass();
	}
	if (ppl_crash_arm("nosuch:1", msg, sizeof msg) == 0 || strstr(msg, "no such point") == NULL)
		_exit(4);
	if (ppl_crash_arm("page_written:2", msg, sizeof msg) != 0 || strcmp(msg, "page_written:2") != 0)
		_exit(5);
	for (int i = 0; i < 5; i++) {
		PPL_CRASH(PAGE_WRITTEN);
		pass();
	}
}

static bool killed(const struct outcome *o)
{
	return WIFSIGNALED(o->status) && WTERMSIG(o->status) == SIGKILL;
}

int main(void)
{
	/* the names: every point has one, unique, and a description */
	for (int p = 0; p < PPL_CRASH_POINT_COUNT; p++) {
		CHECK(ppl_crash_point_name(p) != NULL && ppl_crash_point_name(p)[0] != '\0');
		CHECK(ppl_crash_point_what(p) != NULL && strlen(ppl_crash_point_what(p)) > 10);
		for (int q = 0; q < p; q++)
			CHECK(strcmp(ppl_crash_point_name(p), ppl_crash_point_name(q)) != 0);
	}
	CHECK(ppl_crash_point_name(PPL_CRASH_POINT_COUNT) == NULL);

	/* unarmed: nothing happens */
	struct outcome o = run(NULL, ten_settled);
	CHECK(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0);
	CHECK_EQ_U(o.passes, 10);

	/* the 3rd pass kills, after two whole ones, and says so */
	o = run("gate_settled:3", ten_settled);
	CHECK(killed(&o));
	CHECK_EQ_U(o.passes, 2);
	CHECK(strstr(o.err, "PPL crash point gate_settled hit 3: killing the process") != NULL);

	/* a point the workload never passes often enough: it runs to the end */
	o = run("gate_settled:11", ten_settled);
	CHECK(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0);
	CHECK_EQ_U(o.passes, 10);

	/* armed while running: counted from then */
	o = run(NULL, armed_late);
	CHECK(killed(&o));
	CHECK_EQ_U(o.passes, 6);
	CHECK(strstr(o.err, "PPL crash point page_written hit 2:") != NULL);

	/* a wrong PPL_CRASH_AT stops the process at the first point */
	const char *wrong[] = { "gate_settled", "gate_settled:0", "gate_settled:x", "nosuch:1", ":3", "gate_settled:3x" };
	for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
		o = run(wrong[i], ten_settled);
		CHECK(WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGABRT);
		CHECK_EQ_U(o.passes, 0);
		CHECK(strstr(o.err, wrong[i]) != NULL);
		if (WIFEXITED(o.status) || !strstr(o.err, wrong[i]))
			fprintf(stderr, "PPL_CRASH_AT=%s: %s\n", wrong[i], o.err);
	}
	CHECK_DONE();
}
