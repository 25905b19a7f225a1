/* InnoDB's file names, as every part of the project reads them: the
 * names MariaDB gives, names that only look alike, and which kinds the
 * redo covers (the temporary tablespace never). */
#include "check.h"
#include "ppl/fileclass.h"

static const struct {
	const char *name;
	enum ppl_innodb_file want;
} cases[] = {
	{"ib_logfile0", PPL_INNODB_REDO},
	{"/mnt/data/ib_logfile0", PPL_INNODB_REDO},
	{"ib_logfile101", PPL_INNODB_REDO_NEW},
	{"ib_logfile1", PPL_INNODB_REDO_OLD},
	{"ib_logfile", PPL_INNODB_NONE},
	{"ib_logfile0.bak", PPL_INNODB_NONE},
	{"ibdata1", PPL_INNODB_SYSTEM},
	{"ibdata12", PPL_INNODB_SYSTEM},
	{"ibdata", PPL_INNODB_NONE},
	{"ibdata1.save", PPL_INNODB_NONE},
	{"undo001", PPL_INNODB_UNDO},
	{"data/undo127", PPL_INNODB_UNDO},
	{"undo", PPL_INNODB_NONE},
	{"undo_log", PPL_INNODB_NONE},
	{"ibtmp1", PPL_INNODB_TEMP},
	{"ibtmp", PPL_INNODB_NONE},
	{"test/t1.ibd", PPL_INNODB_TABLE},
	{"t1.ibd", PPL_INNODB_TABLE},
	{".ibd", PPL_INNODB_NONE},
	{"t1.ibd.save", PPL_INNODB_NONE},
	{"test/t1.frm", PPL_INNODB_NONE},
	{"test/t1.cfg", PPL_INNODB_NONE},
	{"test/#sql-alter-1c2d-4.ibd", PPL_INNODB_INTERMEDIATE},
	{"test/#sql-backup-1c2d-4.ibd", PPL_INNODB_INTERMEDIATE},
	{"#sql-ib123.ibd", PPL_INNODB_INTERMEDIATE},
	{"test/dir/", PPL_INNODB_NONE},
	{"aria_log.00000001", PPL_INNODB_NONE},
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum ppl_innodb_file got = ppl_innodb_file_of(cases[i].name);
		if (got != cases[i].want)
			fprintf(stderr, "%s: %d, expected %d\n", cases[i].name, got, cases[i].want);
		CHECK(got == cases[i].want);
	}
	CHECK(ppl_innodb_file_of(NULL) == PPL_INNODB_NONE);

	CHECK(ppl_innodb_file_redo_covered(PPL_INNODB_TABLE));
	CHECK(ppl_innodb_file_redo_covered(PPL_INNODB_SYSTEM));
	CHECK(ppl_innodb_file_redo_covered(PPL_INNODB_UNDO));
	CHECK(ppl_innodb_file_redo_covered(PPL_INNODB_INTERMEDIATE));
	CHECK(!ppl_innodb_file_redo_covered(PPL_INNODB_TEMP));
	CHECK(!ppl_innodb_file_redo_covered(PPL_INNODB_REDO));
	CHECK(!ppl_innodb_file_redo_covered(PPL_INNODB_NONE));
	CHECK(ppl_innodb_file_has_pages(PPL_INNODB_TEMP));
	CHECK(!ppl_innodb_file_has_pages(PPL_INNODB_REDO_NEW));
	CHECK_DONE();
}
