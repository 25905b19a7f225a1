/* InnoDB's file names. See ppl/fileclass.h. */
#include <string.h>

#include "ppl/fileclass.h"

/* s is one or more decimal digits and nothing else */
static bool digits(const char *s)
{
	size_t n = strspn(s, "0123456789");
	return n > 0 && s[n] == '\0';
}

enum ppl_innodb_file ppl_innodb_file_of(const char *name)
{
	if (name == NULL)
		return PPL_INNODB_NONE;
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	size_t n = strlen(base);
	if (strcmp(base, "ib_logfile0") == 0)
		return PPL_INNODB_REDO;
	if (strcmp(base, "ib_logfile101") == 0)
		return PPL_INNODB_REDO_NEW;
	if (strncmp(base, "ib_logfile", 10) == 0 && digits(base + 10))
		return PPL_INNODB_REDO_OLD;
	if (strncmp(base, "ibdata", 6) == 0 && digits(base + 6))
		return PPL_INNODB_SYSTEM;
	if (strncmp(base, "undo", 4) == 0 && digits(base + 4))
		return PPL_INNODB_UNDO;
	if (strncmp(base, "ibtmp", 5) == 0 && digits(base + 5))
		return PPL_INNODB_TEMP;
	if (n > 4 && strcmp(base + n - 4, ".ibd") == 0)
		return strncmp(base, "#sql", 4) == 0 ? PPL_INNODB_INTERMEDIATE : PPL_INNODB_TABLE;
	return PPL_INNODB_NONE;
}

bool ppl_innodb_file_redo_covered(enum ppl_innodb_file k)
{
	return k == PPL_INNODB_SYSTEM || k == PPL_INNODB_UNDO || k == PPL_INNODB_TABLE || k == PPL_INNODB_INTERMEDIATE;
}

bool ppl_innodb_file_has_pages(enum ppl_innodb_file k)
{
	return ppl_innodb_file_redo_covered(k) || k == PPL_INNODB_TEMP;
}
