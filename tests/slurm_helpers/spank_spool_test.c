/*
 * The SPANK plugin's parsing and spool handling, without Slurm: the plugin's source is
 * included with DISPATCH_SPANK_NO_HOOKS (its Slurm hooks left out) and every function
 * the hooks rely on is called here on real files in a scratch folder. Run under valgrind
 * by tests/slurm_helpers/test_spank_plugin.py; it prints one line per check and exits 1
 * on the first that fails.
 */

#define DISPATCH_SPANK_NO_HOOKS
#include "../../slurm_helpers/spank/dispatch_spank.c"

#include <dirent.h>

/* How many descriptors this process holds: every one the plugin opens it must close. */
static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static int failures;

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (cond) {                                                            \
			printf("ok   %s\n", #cond);                                        \
		} else {                                                               \
			printf("FAIL %s (line %d)\n", #cond, __LINE__);                    \
			failures++;                                                    \
		}                                                                      \
	} while (0)

static char scratch[512];

static void path_in(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", scratch, name);
}

static void test_args(void)
{
	struct ds_conf c;
	char err[DS_ERR];
	char *good[] = {"spool=/var/spool/dispatch", "fence=no"};
	char *none[] = {"fence=yes"};
	char *rel[] = {"spool=var/spool"};
	char *dots[] = {"spool=/var/../etc"};
	char *odd[] = {"spool=/x", "colour=blue"};
	CHECK(ds_parse_args(2, good, &c, err, sizeof(err)) == 0 && c.fence == 0 &&
	      strcmp(c.spool, "/var/spool/dispatch") == 0);
	CHECK(ds_parse_args(1, none, &c, err, sizeof(err)) == -1 && strstr(err, "spool=PATH"));
	CHECK(ds_parse_args(1, rel, &c, err, sizeof(err)) == -1 && strstr(err, "absolute"));
	CHECK(ds_parse_args(1, dots, &c, err, sizeof(err)) == -1);
	CHECK(ds_parse_args(2, odd, &c, err, sizeof(err)) == -1 && strstr(err, "colour=blue"));
	CHECK(ds_parse_args(0, NULL, &c, err, sizeof(err)) == -1);
}

static void test_names_and_numbers(void)
{
	unsigned long n = 7;
	CHECK(ds_valid_name("n1") && ds_valid_name("12.0.node-3.epilog"));
	CHECK(!ds_valid_name("") && !ds_valid_name(".hidden") && !ds_valid_name("a/b") &&
	      !ds_valid_name("a b") && !ds_valid_name("../x"));
	CHECK(ds_parse_number("42", DS_EPOCH_PART, &n) == 0 && n == 42);
	CHECK(ds_parse_number("", DS_EPOCH_PART, &n) != 0);
	CHECK(ds_parse_number("12x", DS_EPOCH_PART, &n) != 0);
	CHECK(ds_parse_number("1000000", DS_EPOCH_PART, &n) != 0);
	CHECK(ds_parse_number("99999999999999999999999", DS_EPOCH_PART, &n) != 0);
	CHECK(ds_parse_number("-1", DS_EPOCH_PART, &n) != 0);
}

static void test_fence_text(void)
{
	struct ds_fence f;
	unsigned long n = 9;
	CHECK(ds_parse_fence("job=7f3k\nsubmission=3\n", &f) == 0 && f.submission == 3 &&
	      strcmp(f.job, "7f3k") == 0);
	CHECK(ds_parse_fence("submission=3\njob=7f3k", &f) == 0);
	CHECK(ds_parse_fence("job=7f3k\n", &f) != 0);
	CHECK(ds_parse_fence("job=7f3k\nsubmission=0\n", &f) != 0);
	CHECK(ds_parse_fence("job=../x\nsubmission=1\n", &f) != 0);
	CHECK(ds_parse_fence("job=7f3k\nsubmission=1\nextra=1\n", &f) != 0);
	CHECK(ds_parse_current("current=4\n", &n) == 0 && n == 4);
	CHECK(ds_parse_current("current=ended\n", &n) == 0 && n == 0);
	CHECK(ds_parse_current("current=0\n", &n) != 0);
	CHECK(ds_parse_current("current=4\ncurrent=5\n", &n) != 0);
	CHECK(ds_parse_current("now=4\n", &n) != 0);
	CHECK(ds_parse_run("restart=2\n", &n) == 0 && n == 2);
	CHECK(ds_parse_run("restart=\n", &n) != 0);
}

static void test_record_text(void)
{
	char buf[DS_SMALL], tiny[16];
	struct ds_tasks t = {0, 0, 0, 0};
	ds_count_task(&t, 0);
	ds_count_task(&t, 3 << 8);
	ds_count_task(&t, 9);
	CHECK(t.total == 3 && t.exit0 == 1 && t.nonzero == 1 && t.signaled == 1);
	CHECK(ds_render_record(buf, sizeof(buf), 12, "0", "n2", 1, 1700000000LL, &t) == 0 &&
	      strstr(buf, "job=12\nstep=0\nnode=n2\nrestart=1\ntime=1700000000\nended=tasks\n"
			  "tasks=3\nexit0=1\nnonzero=1\nsignaled=1\n"));
	CHECK(ds_render_record(buf, sizeof(buf), 12, "job", "n2", 0, 1LL, NULL) == 0 &&
	      strstr(buf, "ended=epilog\n") && strncmp(buf, "format=1\n", 9) == 0);
	CHECK(ds_render_record(tiny, sizeof(tiny), 12, "job", "n2", 0, 1LL, NULL) == -1);
	ds_step_name(DS_BATCH_STEP, buf, sizeof(buf));
	CHECK(strcmp(buf, "batch") == 0);
	ds_step_name(4, buf, sizeof(buf));
	CHECK(strcmp(buf, "4") == 0);
}

static void test_spool(void)
{
	char err[DS_ERR], text[DS_SMALL], p[700], why[DS_ERR];
	struct stat st;
	unsigned long sub = 0;
	int spool, dir, fd;
	uid_t user = 4242;

	/* A spool others may write is refused; a symlink to a good one is not followed. */
	path_in(p, sizeof(p), "spool");
	mkdir(p, 0777);
	chmod(p, 0777);
	CHECK(ds_open_spool(p, err, sizeof(err)) == -1 && strstr(err, "only root may write"));
	/* Sticky, others may make their own folders in it (and touch nobody else's). */
	chmod(p, 01733);
	spool = ds_open_spool(p, err, sizeof(err));
	CHECK(spool >= 0);
	if (spool >= 0)
		close(spool);
	chmod(p, 0755);
	path_in(text, sizeof(text), "spool-link");
	CHECK(symlink(p, text) == 0);
	CHECK(ds_open_spool(text, err, sizeof(err)) == -1);
	spool = ds_open_spool(p, err, sizeof(err));
	CHECK(spool >= 0);

	/* The user's folder is made for them, 0700 and theirs. */
	dir = ds_open_user_dir(spool, user, user, 0, err, sizeof(err));
	CHECK(dir == -1);
	dir = ds_open_user_dir(spool, user, user, 1, err, sizeof(err));
	CHECK(dir >= 0 && fstat(dir, &st) == 0 && st.st_uid == user &&
	      (st.st_mode & 0777) == 0700);

	/* A record: written whole, 0400, owned by the user; a planted link is replaced. */
	path_in(p, sizeof(p), "victim");
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	close(fd);
	CHECK(symlinkat(p, dir, "12.0.n1.epilog") == 0);
	CHECK(ds_write_file(dir, "12.0.n1.epilog", "format=1\n", user, user, 0400, err,
			    sizeof(err)) == 0);
	CHECK(stat(p, &st) == 0 && st.st_size == 0); /* nothing went through the link */
	CHECK(fstatat(dir, "12.0.n1.epilog", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	      st.st_uid == user && (st.st_mode & 0777) == 0400);
	CHECK(ds_write_file(dir, "../escape", "x", user, user, 0400, err, sizeof(err)) == -1);
	CHECK(ds_write_file(dir, "12.0.n1.epilog", "format=1\nagain\n", user, user, 0400, err,
			    sizeof(err)) == 0);
	CHECK(ds_read_small(dir, "12.0.n1.epilog", user, text, sizeof(text), err, sizeof(err)) ==
		      0 &&
	      strcmp(text, "format=1\nagain\n") == 0);

	/* Reading: missing is 1; a link, a FIFO, a file others may write, a big one: refused. */
	CHECK(ds_read_small(dir, "nothing", user, text, sizeof(text), err, sizeof(err)) == 1);
	CHECK(symlinkat(p, dir, "fence.5") == 0);
	CHECK(ds_read_small(dir, "fence.5", user, text, sizeof(text), err, sizeof(err)) == -1);
	CHECK(mkfifoat(dir, "fence.6", 0600) == 0);
	CHECK(ds_read_small(dir, "fence.6", user, text, sizeof(text), err, sizeof(err)) == -1);
	CHECK(ds_write_file(dir, "fence.7", "job=abc\nsubmission=2\n", user, user, 0666, err,
			    sizeof(err)) == 0);
	fchmodat(dir, "fence.7", 0666, 0);
	CHECK(ds_read_small(dir, "fence.7", user, text, sizeof(text), err, sizeof(err)) == -1);
	CHECK(ds_read_small(dir, "fence.7", user, text, 4, err, sizeof(err)) == -1);
	fchmodat(dir, "fence.7", 0644, 0);
	CHECK(ds_read_small(dir, "fence.7", 1, text, sizeof(text), err, sizeof(err)) == -1);

	/* Fencing: no fence runs; current at the fence's submission runs; newer or ended not. */
	CHECK(ds_fence_check(dir, user, 99, 0, 0, "", &sub, why, sizeof(why), err, sizeof(err)) == 0 &&
	      sub == 0);
	CHECK(ds_fence_check(dir, user, 7, 0, 0, "dj-abc", &sub, why, sizeof(why), err, sizeof(err)) == 0 &&
	      sub == 2);
	CHECK(ds_write_file(dir, "current.abc", "current=2\n", user, user, 0644, err,
			    sizeof(err)) == 0);
	CHECK(ds_fence_check(dir, user, 7, 0, 0, "dj-abc", &sub, why, sizeof(why), err, sizeof(err)) == 0);
	CHECK(ds_write_file(dir, "current.abc", "current=3\n", user, user, 0644, err,
			    sizeof(err)) == 0);
	CHECK(ds_fence_check(dir, user, 7, 0, 0, "dj-abc", &sub, why, sizeof(why), err, sizeof(err)) == 1 &&
	      strstr(why, "at submission 3; submission 2 may not run"));
	CHECK(ds_write_file(dir, "current.abc", "current=ended\n", user, user, 0644, err,
			    sizeof(err)) == 0);
	CHECK(ds_fence_check(dir, user, 7, 0, 0, "dj-abc", &sub, why, sizeof(why), err, sizeof(err)) == 1 &&
	      strstr(why, "is over"));
	/* The same fence read by another Slurm job 7 (the cluster's ids started again): not its
	 * fence, whatever it says; a job whose name is unknown is judged by the fence. */
	CHECK(ds_fence_check(dir, user, 7, 0, 0, "train", &sub, why, sizeof(why), err, sizeof(err)) == 0 &&
	      sub == 0);
	CHECK(ds_fence_check(dir, user, 7, 0, 0, "dj-abcd", &sub, why, sizeof(why), err, sizeof(err)) ==
		      0 &&
	      sub == 0);
	CHECK(ds_fence_check(dir, user, 7, 0, 0, "", &sub, why, sizeof(why), err, sizeof(err)) == 1);
	/* A name longer than the task's buffer (160 characters or more) is another job's. */
	CHECK(ds_fence_check(dir, user, 7, 0, 0, DS_OTHER_NAME, &sub, why, sizeof(why), err,
			     sizeof(err)) == 0 &&
	      sub == 0);
	CHECK(ds_write_file(dir, "current.abc", "current=soon\n", user, user, 0644, err,
			    sizeof(err)) == 0);
	CHECK(ds_fence_check(dir, user, 7, 0, 0, "dj-abc", &sub, why, sizeof(why), err, sizeof(err)) == -1);
	CHECK(ds_fence_check(dir, user, 6, 0, 0, "", &sub, why, sizeof(why), err, sizeof(err)) == -1);

	/* An element of a group's array (dj-grp, index 4) is fenced by its array id and index
	 * (fence.40_4) until it has a job id of its own: it runs task grp_4. */
	CHECK(ds_write_file(dir, "fence.40_4", "job=grp_4\nsubmission=1\n", user, user, 0644, err,
			    sizeof(err)) == 0);
	CHECK(ds_write_file(dir, "current.grp_4", "current=1\n", user, user, 0644, err,
			    sizeof(err)) == 0);
	CHECK(ds_fence_check(dir, user, 52, 40, 4, "dj-grp", &sub, why, sizeof(why), err,
			     sizeof(err)) == 0 &&
	      sub == 1);
	CHECK(ds_write_file(dir, "current.grp_4", "current=2\n", user, user, 0644, err,
			    sizeof(err)) == 0);
	CHECK(ds_fence_check(dir, user, 52, 40, 4, "dj-grp", &sub, why, sizeof(why), err,
			     sizeof(err)) == 1 &&
	      strstr(why, "job grp_4 is at submission 2; submission 1 may not run"));
	/* Another element of the array, or an array of another name, is not that task. */
	CHECK(ds_fence_check(dir, user, 53, 40, 5, "dj-grp", &sub, why, sizeof(why), err,
			     sizeof(err)) == 0 &&
	      sub == 0);
	CHECK(ds_fence_check(dir, user, 52, 40, 4, "dj-other", &sub, why, sizeof(why), err,
			     sizeof(err)) == 0 &&
	      sub == 0);
	/* A step that names the task itself (DISPATCH_JOB=grp_4, the job keeping the user's
	 * name) is that task's: fenced. */
	CHECK(ds_fence_check(dir, user, 52, 40, 4, "dj-grp_4", &sub, why, sizeof(why), err,
			     sizeof(err)) == 1 &&
	      strstr(why, "job grp_4 is at submission 2; submission 1 may not run"));
	CHECK(ds_fence_check(dir, user, 52, 40, 4, "dj-grp_5", &sub, why, sizeof(why), err,
			     sizeof(err)) == 0 &&
	      sub == 0);
	/* A job id of its own, fenced, is read first. */
	CHECK(ds_write_file(dir, "fence.52", "job=grp_4\nsubmission=2\n", user, user, 0644, err,
			    sizeof(err)) == 0);
	CHECK(ds_fence_check(dir, user, 52, 40, 4, "dj-grp_4", &sub, why, sizeof(why), err,
			     sizeof(err)) == 0 &&
	      sub == 2);
	close(dir);

	/* A user folder someone else owns is refused where the plugin only reads (a task); where
	 * it makes the folder (as root) it moves the other's aside and makes the user's own. */
	dir = ds_open_user_dir(spool, user + 1, user + 1, 1, err, sizeof(err));
	CHECK(dir >= 0);
	if (dir >= 0)
		close(dir);
	snprintf(p, sizeof(p), "%s/spool/%lu", scratch, (unsigned long)(user + 1));
	CHECK(chown(p, user + 2, user + 2) == 0 && stat(p, &st) == 0);
	CHECK(ds_open_user_dir(spool, user + 1, user + 1, 0, err, sizeof(err)) == -1 &&
	      strstr(err, "only its owner may write"));
	dir = ds_open_user_dir(spool, user + 1, user + 1, 1, err, sizeof(err));
	CHECK(dir >= 0);
	if (dir >= 0)
		close(dir);
	snprintf(text, sizeof(text), "%s/spool/.reclaimed-%lu-%lu", scratch,
		 (unsigned long)(user + 1), (unsigned long)st.st_ino);
	CHECK(stat(text, &st) == 0 && st.st_uid == user + 2);
	CHECK(stat(p, &st) == 0 && st.st_uid == user + 1 && (st.st_mode & 0777) == 0700);
	/* The user's own folder that others may write is refused, never taken away. */
	CHECK(chmod(p, 0777) == 0);
	CHECK(ds_open_user_dir(spool, user + 1, user + 1, 1, err, sizeof(err)) == -1);
	/* A user folder replaced by a link (to a folder of theirs) is never followed: moved
	 * aside where the folder is made, refused where it is only read. */
	CHECK(rmdir(p) == 0);
	path_in(text, sizeof(text), "elsewhere");
	mkdir(text, 0700);
	CHECK(chown(text, user + 1, user + 1) == 0 && symlink(text, p) == 0);
	CHECK(ds_open_user_dir(spool, user + 1, user + 1, 0, err, sizeof(err)) == -1);
	dir = ds_open_user_dir(spool, user + 1, user + 1, 1, err, sizeof(err));
	CHECK(dir >= 0 && lstat(p, &st) == 0 && S_ISDIR(st.st_mode));
	if (dir >= 0)
		close(dir);
	close(spool);
}

/*
 * A spool on a filesystem another user filled (FULL names a small tmpfs of its own): a
 * record is still written, in a file of the reserve made while there was room, cut to its
 * text; with the reserve used up, the write says the filesystem is full.
 */
static void test_reserve(const char *full)
{
	char err[DS_ERR], text[DS_SMALL], p[700];
	struct stat st;
	int spool, reserve, dir, fd;
	uid_t user = 4242;
	long written = 0;
	spool = ds_open_spool(full, err, sizeof(err));
	CHECK(spool >= 0);
	if (spool < 0)
		return;
	reserve = ds_reserve_open(spool, 1);
	CHECK(reserve >= 0);
	ds_reserve_fill(reserve);
	dir = ds_open_user_dir(spool, user, user, 1, err, sizeof(err));
	CHECK(dir >= 0);
	/* Another user fills the filesystem. */
	snprintf(p, sizeof(p), "%s/filler", full);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	memset(text, 'x', sizeof(text));
	while (write(fd, text, sizeof(text)) > 0)
		written++;
	close(fd);
	CHECK(written > 0);
	CHECK(ds_write_file(dir, "12.0.n1.epilog", "format=1\nended=epilog\n", user, user, 0400,
			    err, sizeof(err)) == -1 &&
	      strstr(err, "No space left"));
	ds_reserve = reserve;
	for (int i = 0; i < DS_RESERVE_FILES; i++) {
		snprintf(p, sizeof(p), "12.%d.n1.epilog", i);
		CHECK(ds_write_file(dir, p, "format=1\nended=epilog\n", user, user, 0400, err,
				    sizeof(err)) == 0);
	}
	CHECK(fstatat(dir, "12.0.n1.epilog", &st, 0) == 0 && st.st_size == 22 &&
	      st.st_uid == user && (st.st_mode & 0777) == 0400);
	CHECK(ds_read_small(dir, "12.0.n1.epilog", user, text, sizeof(text), err, sizeof(err)) == 0 &&
	      strcmp(text, "format=1\nended=epilog\n") == 0);
	CHECK(ds_write_file(dir, "13.0.n1.epilog", "format=1\n", user, user, 0400, err,
			    sizeof(err)) == -1);
	ds_reserve = -1;
	close(dir);
	close(reserve);
	close(spool);
}

int main(void)
{
	snprintf(scratch, sizeof(scratch), "%s", getenv("SCRATCH") ? getenv("SCRATCH") : "");
	if (scratch[0] != '/') {
		fprintf(stderr, "SCRATCH must name an empty folder\n");
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "must run as root (the plugin does)\n");
		return 2;
	}
	int fds = open_fds();
	test_args();
	test_names_and_numbers();
	test_fence_text();
	test_record_text();
	test_spool();
	if (getenv("FULL") != NULL)
		test_reserve(getenv("FULL"));
	CHECK(open_fds() == fds);
	printf("%d failed\n", failures);
	return failures ? 1 : 0;
}
