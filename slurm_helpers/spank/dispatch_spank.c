/*
 * dispatch_spank: the node side of dispatch, as a SPANK plugin (see docs/spank.md).
 *
 * It runs as root inside slurmd, slurmstepd and the job epilog, so it does little and
 * trusts nothing a job's user controls:
 *
 *   - cessation evidence: when a step's tasks on this node have all exited
 *     (slurm_spank_exit, remote context) and when the job's epilog runs on this node
 *     (slurm_spank_job_epilog), one small record is written into SPOOL/<uid>/;
 *   - DISPATCH_EPOCH on every task of every step, from the submission number and
 *     Slurm's restart count (slurm_spank_task_init);
 *   - fencing at launch: a task of an execution the ledger no longer counts as current
 *     is refused before the user's program runs (slurm_spank_task_init).
 *
 * Every file is opened relative to a folder descriptor that was checked (owner, mode),
 * with O_NOFOLLOW, and written through a fresh temporary file renamed into place. A
 * broken spool never stops a job: the plugin logs one line and lets it run.
 *
 * Plugstack line: optional /path/dispatch_spank.so spool=/shared/dispatch-spool [fence=no]
 *
 * Built with DISPATCH_SPANK_NO_HOOKS, the file is the spool library alone (no Slurm
 * symbols), for tests/spank/test_spool.c to exercise under valgrind.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifndef DISPATCH_SPANK_NO_HOOKS
#include <slurm/spank.h>
#include <slurm/slurm_version.h>
#endif

/* The record format's version; the adapter refuses records of another. */
#define DS_FORMAT 1
/* N and R below one million each: DISPATCH_EPOCH = N * 1000000 + R (docs/protocol.md). */
#define DS_EPOCH_PART 1000000u
/* A record, a fence or the marker: a few lines; anything larger is not ours. */
#define DS_SMALL 1024
/* Room for one log line. */
#define DS_ERR 1024
/* The exit status of a task refused as a stale execution (docs/spank.md). */
#define DS_STALE_EXIT 97
/* Slurm's step ids for the batch script and the extern step (slurm/slurm.h). */
#define DS_BATCH_STEP 0xfffffffbu
#define DS_EXTERN_STEP 0xfffffffcu
#define DS_INTERACTIVE_STEP 0xfffffffau
/* The spool's reserve (ds_reserve_fill): files made ahead while there is room, each this
 * long (a record is under DS_SMALL), taken for a record when the filesystem refuses a new one. */
#define DS_RESERVE_FILES 16
#define DS_RESERVE_BYTES 4096
/* Stands for a job name longer than any a fence can name (ds_job_name); no dj- prefix. */
#define DS_OTHER_NAME "(longer than any dispatch job's name)"

struct ds_conf {
	char spool[512];
	int fence;
};

/* How the tasks of a step ended on this node, counted as each one's status is collected. */
struct ds_tasks {
	unsigned total, exit0, nonzero, signaled;
};

struct ds_fence {
	char job[64];
	unsigned long submission;
};

/* ------------------------------------------------------------------ parsing */

/* 0 and the settings, or -1 with a one-line reason in err. */
static int ds_parse_args(int ac, char **av, struct ds_conf *conf, char *err, size_t errlen)
{
	memset(conf, 0, sizeof(*conf));
	conf->fence = 1;
	for (int i = 0; i < ac; i++) {
		const char *a = av[i];
		if (strncmp(a, "spool=", 6) == 0) {
			const char *p = a + 6;
			size_t n = strlen(p);
			if (p[0] != '/' || n >= sizeof(conf->spool) || strstr(p, "/../") ||
			    (n >= 3 && strcmp(p + n - 3, "/..") == 0)) {
				snprintf(err, errlen, "spool=%s: expected an absolute path without ..", p);
				return -1;
			}
			memcpy(conf->spool, p, n + 1);
		} else if (strcmp(a, "fence=yes") == 0) {
			conf->fence = 1;
		} else if (strcmp(a, "fence=no") == 0) {
			conf->fence = 0;
		} else {
			snprintf(err, errlen, "unknown argument %.80s (known: spool=PATH, fence=yes|no)", a);
			return -1;
		}
	}
	if (conf->spool[0] == '\0') {
		snprintf(err, errlen, "no spool=PATH argument in plugstack.conf");
		return -1;
	}
	return 0;
}

/* A name that is one path component of letters, digits, '.', '_' or '-', not dot-led. */
static int ds_valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 100 || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '.' || c == '_' || c == '-';
		if (!ok)
			return 0;
	}
	return 1;
}

/* A decimal number below limit, the whole of s; 0 when it is one. */
static int ds_parse_number(const char *s, unsigned long limit, unsigned long *out)
{
	unsigned long v = 0;
	if (*s == '\0')
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v >= limit)
			return -1;
	}
	*out = v;
	return 0;
}

/*
 * A fence file: "job=<dispatch job id>\nsubmission=<N>\n". 0 when both are there and
 * well formed; anything else (unknown keys, junk) is refused whole.
 */
static int ds_parse_fence(const char *text, struct ds_fence *f)
{
	char line[128];
	int have_job = 0, have_sub = 0;
	memset(f, 0, sizeof(*f));
	while (*text) {
		const char *end = strchr(text, '\n');
		size_t n = end ? (size_t)(end - text) : strlen(text);
		if (n >= sizeof(line))
			return -1;
		memcpy(line, text, n);
		line[n] = '\0';
		text += n + (end ? 1 : 0);
		if (n == 0)
			continue;
		if (strncmp(line, "job=", 4) == 0 && ds_valid_name(line + 4) &&
		    strlen(line + 4) < sizeof(f->job)) {
			strcpy(f->job, line + 4);
			have_job = 1;
		} else if (strncmp(line, "submission=", 11) == 0 &&
			   ds_parse_number(line + 11, DS_EPOCH_PART, &f->submission) == 0 &&
			   f->submission > 0) {
			have_sub = 1;
		} else {
			return -1;
		}
	}
	return have_job && have_sub ? 0 : -1;
}

/*
 * The ledger's current submission of a job: "current=<N>\n", or "current=ended\n" once
 * the job is over (cancelled, superseded, settled). Returns 0 with *n set (0 for ended).
 */
static int ds_parse_current(const char *text, unsigned long *n)
{
	char line[64];
	size_t len = strcspn(text, "\n");
	if (len >= sizeof(line) || strncmp(text, "current=", 8) != 0)
		return -1;
	if (text[len] == '\n' && text[len + 1] != '\0')
		return -1;
	memcpy(line, text, len);
	line[len] = '\0';
	if (strcmp(line + 8, "ended") == 0) {
		*n = 0;
		return 0;
	}
	if (ds_parse_number(line + 8, DS_EPOCH_PART, n) != 0 || *n == 0)
		return -1;
	return 0;
}

/* The prolog's note of which execution runs on a node: "restart=<R>\n". */
static int ds_parse_run(const char *text, unsigned long *restart)
{
	char line[64];
	size_t len = strcspn(text, "\n");
	if (len >= sizeof(line) || strncmp(text, "restart=", 8) != 0)
		return -1;
	if (text[len] == '\n' && text[len + 1] != '\0')
		return -1;
	memcpy(line, text, len);
	line[len] = '\0';
	return ds_parse_number(line + 8, DS_EPOCH_PART, restart);
}

static void ds_step_name(uint32_t step, char *buf, size_t len)
{
	if (step == DS_BATCH_STEP)
		snprintf(buf, len, "batch");
	else if (step == DS_EXTERN_STEP)
		snprintf(buf, len, "extern");
	else if (step == DS_INTERACTIVE_STEP)
		snprintf(buf, len, "interactive");
	else
		snprintf(buf, len, "%" PRIu32, step);
}

/* The record's text; what says how the node's tasks ended ("epilog" for the job's epilog). */
static int ds_render_record(char *buf, size_t len, uint32_t job, const char *step,
			    const char *node, uint32_t restart, long long at,
			    const struct ds_tasks *t)
{
	int n;
	if (t == NULL)
		n = snprintf(buf, len,
			     "format=%d\njob=%" PRIu32 "\nstep=%s\nnode=%s\nrestart=%" PRIu32
			     "\ntime=%lld\nended=epilog\n",
			     DS_FORMAT, job, step, node, restart, at);
	else
		n = snprintf(buf, len,
			     "format=%d\njob=%" PRIu32 "\nstep=%s\nnode=%s\nrestart=%" PRIu32
			     "\ntime=%lld\nended=tasks\ntasks=%u\nexit0=%u\nnonzero=%u\nsignaled=%u\n",
			     DS_FORMAT, job, step, node, restart, at, t->total, t->exit0,
			     t->nonzero, t->signaled);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static void ds_count_task(struct ds_tasks *t, int status)
{
	t->total++;
	if (WIFSIGNALED(status))
		t->signaled++;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		t->exit0++;
	else
		t->nonzero++;
}

/* ------------------------------------------------------------------ the spool */

/*
 * The spool folder: a directory owned by root that nobody else may write, or that others
 * may write only with the sticky bit (mode 1733: each user makes their own SPOOL/<uid> before
 * their first job, and nobody may rename or remove another's entry).
 */
static int ds_open_spool(const char *path, char *err, size_t errlen)
{
	struct stat st;
	/* As a path: a task runs as its user, who may not list a spool of mode 1733. */
	int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "spool %.300s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || st.st_uid != 0 ||
	    ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0)) {
		snprintf(err, errlen,
			 "spool %.300s: must be a folder owned by root that only root may write, "
			 "or sticky (mode 1733)",
			 path);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Move aside whatever another user put at SPOOL/<name>: in a sticky spool they may have made
 * it first (a folder, a file or a link of theirs). It is renamed, never followed or deleted,
 * to .reclaimed-<name>-<inode>, where no user's folder is looked for. What uid made there
 * itself (a folder of a wrong mode, a link) is the user's own doing, theirs to fix: refused,
 * never taken away.
 */
static int ds_reclaim(int spool, const char *name, uid_t uid)
{
	struct stat st;
	char aside[96];
	if (fstatat(spool, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -1;
	if (st.st_uid == uid)
		return 0;
	snprintf(aside, sizeof(aside), ".reclaimed-%s-%lu", name, (unsigned long)st.st_ino);
	return renameat(spool, name, spool, aside);
}

/*
 * The job owner's folder SPOOL/<uid>: made (0700, theirs) when create is set and it is
 * missing, and taken back from another user who made it first (ds_reclaim, as root);
 * refused unless it is a directory of that uid that no one else may write.
 */
static int ds_open_user_dir(int spool, uid_t uid, gid_t gid, int create, char *err, size_t errlen)
{
	char name[32];
	struct stat st;
	int fd;
	snprintf(name, sizeof(name), "%lu", (unsigned long)uid);
	if (create && geteuid() == 0 && ds_reclaim(spool, name, uid) != 0) {
		snprintf(err, errlen, "spool folder %s: not a folder of uid %s, and it could not be "
			 "moved aside: %s", name, name, strerror(errno));
		return -1;
	}
	fd = openat(spool, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdirat(spool, name, 0700) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "spool folder %s: %s", name, strerror(errno));
			return -1;
		}
		fd = openat(spool, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && geteuid() == 0 && fstat(fd, &st) == 0 && st.st_uid == 0 && uid != 0 &&
		    fchown(fd, uid, gid) != 0) {
			snprintf(err, errlen, "spool folder %s: chown: %s", name, strerror(errno));
			close(fd);
			return -1;
		}
	}
	if (fd < 0) {
		snprintf(err, errlen, "spool folder %s: %s", name, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || st.st_uid != uid || (st.st_mode & 022) != 0) {
		snprintf(err, errlen,
			 "spool folder %s: must be a folder of uid %s that only its owner may write",
			 name, name);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * SPOOL/.reserve, root's, where the files of the reserve wait: the cessation evidence must be
 * written even when the spool's filesystem is full (another user may have filled it). While
 * it is open (ds_reserve >= 0), ds_write_file takes a reserve file where the filesystem
 * refuses a new one; ds_reserve_fill makes the missing ones while there is room.
 */
static int ds_reserve = -1;

static int ds_reserve_open(int spool, int make)
{
	struct stat st;
	int fd;
	/* In a sticky spool another user may have made .reserve first: moved aside, as theirs. */
	if (make)
		(void)ds_reclaim(spool, ".reserve", 0);
	fd = openat(spool, ".reserve", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && make && mkdirat(spool, ".reserve", 0700) == 0)
		fd = openat(spool, ".reserve", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 077) != 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Make the reserve's missing files, each DS_RESERVE_BYTES allocated; stops when refused. */
static void ds_reserve_fill(int reserve)
{
	char slot[16];
	struct stat st;
	for (int i = 0; i < DS_RESERVE_FILES; i++) {
		snprintf(slot, sizeof(slot), "r%d", i);
		if (fstatat(reserve, slot, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		int fd = openat(reserve, slot, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return;
		int rc = posix_fallocate(fd, 0, DS_RESERVE_BYTES);
		close(fd);
		if (rc != 0) {
			(void)unlinkat(reserve, slot, 0);
			return;
		}
	}
}

/* A reserve file moved to dir/tmp and opened for writing over its allocated bytes; -1. */
static int ds_take_reserve(int dir, const char *tmp, mode_t mode)
{
	char slot[16];
	for (int i = 0; ds_reserve >= 0 && i < DS_RESERVE_FILES; i++) {
		snprintf(slot, sizeof(slot), "r%d", i);
		if (renameat(ds_reserve, slot, dir, tmp) != 0)
			continue;
		int fd = openat(dir, tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && fchmod(fd, mode) == 0)
			return fd;
		if (fd >= 0)
			close(fd);
		(void)unlinkat(dir, tmp, 0);
		return -1;
	}
	errno = ENOSPC;
	return -1;
}

/* Whether a write failed because the filesystem is full, or the user's quota is. */
static int ds_full(int e)
{
	return e == ENOSPC || e == EDQUOT;
}

/*
 * Write text as dir/name, atomically: a fresh temporary file (O_EXCL, O_NOFOLLOW), mode
 * 0400 and owned by uid, synced, then renamed over name (a link planted there is
 * replaced, never followed).
 */
static int ds_write_file(int dir, const char *name, const char *text, uid_t uid, gid_t gid,
			 mode_t mode, char *err, size_t errlen)
{
	char tmp[160];
	size_t len = strlen(text), off = 0;
	unsigned long nonce;
	int fd = -1, reserved = 0;
	if (!ds_valid_name(name)) {
		snprintf(err, errlen, "refusing to write %.100s: not a plain name", name);
		return -1;
	}
	/* A name nobody can guess: in a sticky spool another user could make a guessable one
	 * first, and the O_EXCL open would fail every time. */
	for (int i = 0; i < 4 && fd < 0; i++) {
		if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != (ssize_t)sizeof(nonce))
			nonce = (unsigned long)time(NULL) * 2654435761u + (unsigned long)i;
		snprintf(tmp, sizeof(tmp), ".tmp-%ld-%016lx-%s", (long)getpid(), nonce, name);
		fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0 && ds_full(errno) && len <= DS_RESERVE_BYTES) {
		fd = ds_take_reserve(dir, tmp, mode);
		reserved = fd >= 0;
	}
	if (fd < 0) {
		snprintf(err, errlen, "write %s: %s", name, strerror(errno));
		return -1;
	}
	if (geteuid() == 0 && uid != 0 && fchown(fd, uid, gid) != 0)
		goto fail;
	while (off < len) {
		ssize_t w = pwrite(fd, text + off, len - off, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && ds_full(errno) && !reserved && len <= DS_RESERVE_BYTES) {
			/* Made, but no room for its text: a reserve file, allocated, in its place. */
			close(fd);
			(void)unlinkat(dir, tmp, 0);
			fd = ds_take_reserve(dir, tmp, mode);
			if (fd < 0)
				goto fail;
			reserved = 1;
			off = 0;
			if (geteuid() == 0 && uid != 0 && fchown(fd, uid, gid) != 0)
				goto fail;
			continue;
		}
		if (w < 0)
			goto fail;
		off += (size_t)w;
	}
	/* A reserve file keeps its allocated bytes past the text until cut to the text. */
	if (reserved && ftruncate(fd, (off_t)len) != 0)
		goto fail;
	if (fsync(fd) != 0 || close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (renameat(dir, tmp, dir, name) != 0)
		goto fail;
	(void)fsync(dir);
	return 0;
fail:
	snprintf(err, errlen, "write %s: %s", name, strerror(errno));
	if (fd >= 0)
		close(fd);
	(void)unlinkat(dir, tmp, 0);
	return -1;
}

/*
 * Read a small regular file dir/name that owner (or root) wrote and no one else may
 * write. Returns 0 with the text, 1 when it does not exist, -1 when it is refused.
 */
static int ds_read_small(int dir, const char *name, uid_t owner, char *buf, size_t len, char *err,
			 size_t errlen)
{
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		snprintf(err, errlen, "read %s: %s", name, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_uid != owner && st.st_uid != 0) ||
	    (st.st_mode & 022) != 0 || st.st_size < 0 || (size_t)st.st_size >= len) {
		snprintf(err, errlen, "read %s: not a small file of uid %lu that only its owner may write",
			 name, (unsigned long)owner);
		close(fd);
		return -1;
	}
	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "read %s: %s", name, strerror(errno));
			close(fd);
			return -1;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return 0;
}

/* Whether Slurm job name is dispatch's name for job (dj-<job>, docs/slurm-mapping.md). */
static int ds_names_job(const char *name, const char *job)
{
	return strncmp(name, "dj-", 3) == 0 && strcmp(name + 3, job) == 0;
}

/*
 * Whether element task of an array named name runs job: the array of a group (dj-<group>)
 * runs task <group>_<task> in each element; a step that names the task itself (dj-<job>) is
 * that task's.
 */
static int ds_names_element(const char *name, const char *job, uint32_t task)
{
	char expect[160];
	if (strncmp(name, "dj-", 3) != 0)
		return 0;
	if (strcmp(name + 3, job) == 0)
		return 1;
	snprintf(expect, sizeof(expect), "%s_%" PRIu32, name + 3, task);
	return strcmp(expect, job) == 0;
}

/*
 * Whether an execution of Slurm job slurm_job, named name ("" when unknown), may run: 0 yes
 * (with *submission set when a fence names it, else 0), 1 no (reason in why), -1 the spool
 * could not say (err). A fence naming a dispatch job the Slurm job is not named for is an
 * earlier job's that had the same id (a cluster whose ids started again): not this one's.
 */
static int ds_fence_check(int user_dir, uid_t uid, uint32_t slurm_job, uint32_t array_job,
			  uint32_t array_task, const char *slurm_name, unsigned long *submission,
			  char *why, size_t whylen, char *err, size_t errlen)
{
	char name[128], text[DS_SMALL];
	struct ds_fence f;
	unsigned long current;
	int rc, element = 0;
	*submission = 0;
	snprintf(name, sizeof(name), "fence.%" PRIu32, slurm_job);
	rc = ds_read_small(user_dir, name, uid, text, sizeof(text), err, errlen);
	if (rc > 0 && array_job != 0) {
		/* An element of a group's array is fenced by the one id it has from its creation
		 * on, <array job>_<index>: its own job id comes only when it starts. */
		snprintf(name, sizeof(name), "fence.%" PRIu32 "_%" PRIu32, array_job, array_task);
		rc = ds_read_small(user_dir, name, uid, text, sizeof(text), err, errlen);
		element = 1;
	}
	if (rc != 0)
		return rc > 0 ? 0 : -1;
	if (ds_parse_fence(text, &f) != 0) {
		snprintf(err, errlen, "%s: not a fence file", name);
		return -1;
	}
	if (slurm_name[0] != '\0' &&
	    !(element ? ds_names_element(slurm_name, f.job, array_task)
		      : ds_names_job(slurm_name, f.job)))
		return 0;
	*submission = f.submission;
	snprintf(name, sizeof(name), "current.%s", f.job);
	rc = ds_read_small(user_dir, name, uid, text, sizeof(text), err, errlen);
	if (rc != 0)
		return rc > 0 ? 0 : -1;
	if (ds_parse_current(text, &current) != 0) {
		snprintf(err, errlen, "%s: not a current file", name);
		return -1;
	}
	if (current == 0) {
		snprintf(why, whylen, "stale execution: job %s is over; submission %lu may not run",
			 f.job, f.submission);
		return 1;
	}
	if (current > f.submission) {
		snprintf(why, whylen,
			 "stale execution: job %s is at submission %lu; submission %lu may not run",
			 f.job, current, f.submission);
		return 1;
	}
	return 0;
}

#ifndef DISPATCH_SPANK_NO_HOOKS

/* ------------------------------------------------------------------ Slurm hooks */

SPANK_PLUGIN(dispatch, 1);

static struct ds_conf conf;
static int configured;
static struct ds_tasks tasks;

/* The plugstack arguments, once per process; a bad line is logged and turns the plugin off. */
static int ds_configure(int ac, char **av)
{
	char err[DS_ERR];
	if (configured)
		return configured > 0;
	if (ds_parse_args(ac, av, &conf, err, sizeof(err)) != 0) {
		slurm_error("dispatch_spank: %s; the plugin does nothing", err);
		configured = -1;
		return 0;
	}
	configured = 1;
	return 1;
}

static void ds_node_name(spank_t sp, char *buf, size_t len)
{
	const char *env;
	buf[0] = '\0';
	if (sp != NULL && spank_remote(sp) &&
	    spank_getenv(sp, "SLURMD_NODENAME", buf, (int)len) == ESPANK_SUCCESS)
		return;
	env = getenv("SLURMD_NODENAME");
	if (env != NULL && strlen(env) < len)
		strcpy(buf, env);
}

/* SPOOL/<uid>, checked; -1 with the reason in err. */
static int ds_user_dir(uid_t uid, gid_t gid, int create, char *err, size_t errlen)
{
	int dir, spool = ds_open_spool(conf.spool, err, errlen);
	if (spool < 0)
		return -1;
	dir = ds_open_user_dir(spool, uid, gid, create, err, errlen);
	close(spool);
	return dir;
}

/*
 * Open the spool's reserve (made, and its missing files made while there is room) for the
 * writes that follow until ds_reserve_end: the prolog's note and the epilog's record, which
 * the cessation evidence is. Only as root; a spool that cannot take it changes nothing.
 */
static void ds_reserve_begin(void)
{
	char err[DS_ERR];
	int spool;
	if (geteuid() != 0 || (spool = ds_open_spool(conf.spool, err, sizeof(err))) < 0)
		return;
	ds_reserve = ds_reserve_open(spool, 1);
	close(spool);
	if (ds_reserve >= 0)
		ds_reserve_fill(ds_reserve);
}

static void ds_reserve_end(void)
{
	if (ds_reserve >= 0)
		close(ds_reserve);
	ds_reserve = -1;
}

/* Which execution of the job runs on this node, as the prolog noted it: 0 and *restart. */
static int ds_noted_restart(int dir, uid_t uid, uint32_t job, const char *node,
			    unsigned long *restart)
{
	char name[160], text[DS_SMALL], err[DS_ERR];
	snprintf(name, sizeof(name), "run.%" PRIu32 ".%s", job, node);
	if (!ds_valid_name(node) ||
	    ds_read_small(dir, name, uid, text, sizeof(text), err, sizeof(err)) != 0)
		return -1;
	return ds_parse_run(text, restart);
}

/* Write one record into SPOOL/<uid>/; every failure is one log line, and the job goes on. */
static void ds_record(int dir, uid_t uid, gid_t gid, uint32_t job, uint32_t step,
		      unsigned long restart, const char *node, const struct ds_tasks *t)
{
	char err[DS_ERR], stepname[32], name[160], text[DS_SMALL];
	ds_step_name(step, stepname, sizeof(stepname));
	if (t == NULL)
		snprintf(name, sizeof(name), "%" PRIu32 ".%lu.%s.epilog", job, restart, node);
	else
		snprintf(name, sizeof(name), "%" PRIu32 ".%lu.%s.step-%s", job, restart, node,
			 stepname);
	if (ds_render_record(text, sizeof(text), job, t == NULL ? "job" : stepname, node,
			     (uint32_t)restart, (long long)time(NULL), t) != 0)
		return;
	if (ds_write_file(dir, name, text, uid, gid, 0400, err, sizeof(err)) != 0)
		slurm_error("dispatch_spank: job %" PRIu32 ": %s; no evidence written", job, err);
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	char err[DS_ERR], text[128];
	int spool;
	(void)sp;
	if (spank_context() != S_CTX_SLURMD || !ds_configure(ac, av))
		return 0;
	/* The marker the adapter probes: the plugin is loaded on this cluster's nodes. */
	spool = ds_open_spool(conf.spool, err, sizeof(err));
	if (spool < 0) {
		slurm_error("dispatch_spank: %s; no evidence will be written", err);
		return 0;
	}
	snprintf(text, sizeof(text), "format=%d\nslurm=%d.%02d\nfence=%s\n", DS_FORMAT,
		 SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER), SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
		 conf.fence ? "yes" : "no");
	if (ds_write_file(spool, "plugin", text, 0, 0, 0444, err, sizeof(err)) != 0)
		slurm_error("dispatch_spank: %s", err);
	close(spool);
	return 0;
}

/* The job's uid and gid, its id, and this node's name, in the prolog and epilog. */
static int ds_script_items(spank_t sp, uint32_t *job, uid_t *uid, gid_t *gid, char *node,
			   size_t len)
{
	if (spank_get_item(sp, S_JOB_ID, job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, gid) != ESPANK_SUCCESS)
		return -1;
	ds_node_name(NULL, node, len);
	return ds_valid_name(node) ? 0 : -1;
}

/*
 * At allocation (PrologFlags=Alloc) or at the first step on a node: note which execution
 * runs here. The epilog cannot tell by itself: after a requeue its restart count is
 * already the next execution's.
 */
int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	uint32_t job = 0;
	uid_t uid = 0;
	gid_t gid = 0;
	unsigned long restart = 0;
	const char *env = getenv("SLURM_JOB_RESTART_COUNT");
	char node[128], name[160], text[64], err[DS_ERR];
	int dir;
	if (!ds_configure(ac, av) || ds_script_items(sp, &job, &uid, &gid, node, sizeof(node)) != 0)
		return 0;
	if (env != NULL && ds_parse_number(env, DS_EPOCH_PART, &restart) != 0) {
		slurm_error("dispatch_spank: job %" PRIu32 ": restart count %.20s unreadable", job, env);
		return 0;
	}
	dir = ds_user_dir(uid, gid, 1, err, sizeof(err));
	if (dir < 0) {
		slurm_error("dispatch_spank: job %" PRIu32 ": %s; no evidence written", job, err);
		return 0;
	}
	snprintf(name, sizeof(name), "run.%" PRIu32 ".%s", job, node);
	snprintf(text, sizeof(text), "restart=%lu\n", restart);
	ds_reserve_begin();
	if (ds_write_file(dir, name, text, 0, 0, 0444, err, sizeof(err)) != 0)
		slurm_error("dispatch_spank: job %" PRIu32 ": %s; no evidence written", job, err);
	ds_reserve_end();
	close(dir);
	return 0;
}

/* The allocation on this node is over: the evidence the adapter's cessation signal reads. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	uint32_t job = 0;
	uid_t uid = 0;
	gid_t gid = 0;
	unsigned long restart = 0;
	char node[128], name[160], err[DS_ERR];
	int dir;
	if (!ds_configure(ac, av))
		return 0;
	if (ds_script_items(sp, &job, &uid, &gid, node, sizeof(node)) != 0) {
		slurm_error("dispatch_spank: the epilog names no job or node; no evidence written");
		return 0;
	}
	dir = ds_user_dir(uid, gid, 1, err, sizeof(err));
	if (dir < 0) {
		slurm_error("dispatch_spank: job %" PRIu32 ": %s; no evidence written", job, err);
		return 0;
	}
	if (ds_noted_restart(dir, uid, job, node, &restart) != 0) {
		slurm_error("dispatch_spank: job %" PRIu32 " on %s: no prolog noted its execution "
			    "(PrologFlags=Alloc?); no evidence written", job, node);
	} else {
		ds_reserve_begin();
		ds_record(dir, uid, gid, job, DS_BATCH_STEP, restart, node, NULL);
		ds_reserve_end();
		snprintf(name, sizeof(name), "run.%" PRIu32 ".%s", job, node);
		(void)unlinkat(dir, name, 0);
	}
	close(dir);
	return 0;
}

/* The execution a step belongs to: the prolog's note, else the job's environment. */
static unsigned long ds_step_restart(spank_t sp, int dir, uid_t uid, uint32_t job,
				     const char *node)
{
	unsigned long restart = 0;
	uint32_t item = 0;
	char value[32];
	if (dir >= 0 && ds_noted_restart(dir, uid, job, node, &restart) == 0)
		return restart;
	if (spank_getenv(sp, "SLURM_RESTART_COUNT", value, (int)sizeof(value)) == ESPANK_SUCCESS &&
	    ds_parse_number(value, DS_EPOCH_PART, &restart) == 0)
		return restart;
	if (spank_get_item(sp, S_SLURM_RESTART_COUNT, &item) == ESPANK_SUCCESS &&
	    item < DS_EPOCH_PART)
		return item;
	return 0;
}

/*
 * The dispatch name of the task's job (dj-<job>), which only ever narrows a fence to the Slurm
 * job it was written for. A job dispatch made before it kept the user's name is named so in
 * SLURM_JOB_NAME; one that keeps the user's name says its job in DISPATCH_JOB (set by sbatch's
 * export, and by dispatch's wrapper for every step the script starts). "" when the task shows
 * neither (a step started with srun --export=NONE): its job is judged by the fence as it
 * stands, so that step is fenced and gets DISPATCH_EPOCH too. A name or a DISPATCH_JOB too long
 * for buf is longer than any dispatch job a fence can name (a job is under 64 characters): it
 * is given as DS_OTHER_NAME, which names no dispatch job, so no fence applies to it.
 */
static void ds_job_name(spank_t sp, char *buf, size_t len)
{
	char job[128];
	spank_err_t named = spank_getenv(sp, "SLURM_JOB_NAME", buf, (int)len);
	spank_err_t rc;
	if (named == ESPANK_NOSPACE) {
		snprintf(buf, len, "%s", DS_OTHER_NAME);
		return;
	}
	if (named == ESPANK_SUCCESS && strncmp(buf, "dj-", 3) == 0)
		return;
	rc = spank_getenv(sp, "DISPATCH_JOB", job, (int)sizeof(job));
	if (rc == ESPANK_SUCCESS && job[0] != '\0')
		snprintf(buf, len, "dj-%s", job);
	else if (rc == ESPANK_NOSPACE)
		snprintf(buf, len, "%s", DS_OTHER_NAME);
	else
		buf[0] = '\0';
}

/*
 * Each task, just before the user's program: refuse a stale execution, and set
 * DISPATCH_EPOCH from the submission number and the restart count. Runs as the job's user.
 */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	char err[DS_ERR], why[DS_ERR], value[32], node[128], slurm_name[160];
	uint32_t job = 0, array_job = 0, array_task = 0;
	uid_t uid = 0;
	unsigned long submission = 0, restart;
	int dir, rc = 0;
	if (!spank_remote(sp) || !ds_configure(ac, av))
		return 0;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
		return 0;
	ds_node_name(sp, node, sizeof(node));
	ds_job_name(sp, slurm_name, sizeof(slurm_name));
	dir = ds_user_dir(uid, 0, 0, err, sizeof(err));
	if (spank_get_item(sp, S_JOB_ARRAY_ID, &array_job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &array_task) != ESPANK_SUCCESS)
		array_job = 0;
	if (dir >= 0)
		rc = ds_fence_check(dir, uid, job, array_job, array_task, slurm_name, &submission,
				    why, sizeof(why), err, sizeof(err));
	restart = ds_step_restart(sp, dir, uid, job, node);
	if (dir >= 0)
		close(dir);
	if (rc < 0)
		slurm_error("dispatch_spank: job %" PRIu32 ": %s; not fenced", job, err);
	if (rc == 1 && conf.fence) {
		/* This process becomes the user's program at execve: ending it here is the
		 * refusal. An error return would stop the task only for a `required` plugin. */
		slurm_error("dispatch_spank: job %" PRIu32 ": %s", job, why);
		_exit(DS_STALE_EXIT);
	}
	if (submission == 0 &&
	    (spank_getenv(sp, "DISPATCH_SUBMISSION", value, (int)sizeof(value)) != ESPANK_SUCCESS ||
	     ds_parse_number(value, DS_EPOCH_PART, &submission) != 0))
		submission = 0;
	if (submission > 0) {
		snprintf(value, sizeof(value), "%lu", submission * DS_EPOCH_PART + restart);
		spank_setenv(sp, "DISPATCH_EPOCH", value, 1);
		snprintf(value, sizeof(value), "%lu", submission);
		spank_setenv(sp, "DISPATCH_SUBMISSION", value, 1);
	}
	return 0;
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	int status = 0;
	(void)ac;
	(void)av;
	if (spank_remote(sp) && spank_get_item(sp, S_TASK_EXIT_STATUS, &status) == ESPANK_SUCCESS)
		ds_count_task(&tasks, status);
	return 0;
}

/* Every task of this step on this node has exited: a record of how they ended. */
int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	uint32_t job = 0, step = 0;
	uid_t uid = 0;
	gid_t gid = 0;
	char node[128], err[DS_ERR];
	int dir;
	if (!spank_remote(sp) || !ds_configure(ac, av))
		return 0;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
		return 0;
	ds_node_name(sp, node, sizeof(node));
	if (!ds_valid_name(node)) {
		slurm_error("dispatch_spank: job %" PRIu32 ": no node name; no evidence written", job);
		return 0;
	}
	dir = ds_user_dir(uid, gid, 1, err, sizeof(err));
	if (dir < 0) {
		slurm_error("dispatch_spank: job %" PRIu32 ": %s; no evidence written", job, err);
		return 0;
	}
	ds_record(dir, uid, gid, job, step, ds_step_restart(sp, dir, uid, job, node), node, &tasks);
	close(dir);
	return 0;
}

#endif /* DISPATCH_SPANK_NO_HOOKS */
