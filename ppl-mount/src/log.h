/* Messages for the operator: stderr in the foreground, syslog once the
 * process has detached (stderr is then /dev/null). */
#ifndef PPL_MOUNT_LOG_H
#define PPL_MOUNT_LOG_H

void log_to_syslog(void);
void log_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
