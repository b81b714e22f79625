/* Rules: which processes are profiled, with what, and how they are labelled, without a hand
 * at a shell. config/rules (one write holds the whole set) or `--rules FILE`, one rule per
 * line, '#' comments; a rule is known by its line number ("rule 3"):
 *
 *   <match>... enable [for=DURATION] [collectors=LIST] | disable | set KEY=VALUE...
 *
 * A match is comm=GLOB, exe=GLOB (the executable's path), cgroup=GLOB (its cgroup path),
 * container=GLOB (the container id), uid=N (its real uid) or label=KEY=GLOB; all of a rule's
 * must hold, and a rule without one matches every process. Every matching rule applies, in
 * order: `set` adds labels (later rules see them), and of enable and disable the last
 * matching one decides.
 *
 * Applied to every process when the rules are written (a process a rule enabled that no rule
 * enables now is disabled), then to each new process at its exec or fork, told by the exec
 * watch (daemon/exec_watch.h) while a rule enables or sets labels, with a pass over /proc
 * every 30 s and at once when the watch's ring lost events. Where the kernel refuses the
 * watch (or APERTURE_RULES_POLL is set), a pass once a second finds processes new or exec'd
 * since the last (a process is known by pid, start time and comm). An explicit
 * `echo 0 > enable` wins over every rule and `echo 1` is the user's own; a temporary enable
 * expires and no rule renews it for that process. A pass enables at most config/max_targets
 * targets in all and counts (and says in status) those it left disabled. */
#ifndef APERTURE_DAEMON_RULES_H
#define APERTURE_DAEMON_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct aperture;
struct rules;

int rules_new(struct aperture *a, struct rules **out);
void rules_free(struct rules *r);

/* Replaces the rules with text (append: adds text to them, as the later writes of one open
 * of config/rules do), validated whole: on error nothing changes and why names the line.
 * Then applies them to every running process. */
int rules_set(struct rules *r, bool append, const char *text, size_t len, char *why,
	      size_t why_size);
/* The same without applying them: the next rules_tick does (at start). */
int rules_load(struct rules *r, const char *text, size_t len, char *why, size_t why_size);
int rules_read(struct rules *r, FILE *out);
/* Once a second: the pass over /proc when one is due (see above). */
void rules_tick(struct rules *r);
/* The daemon's status lines: rules, rules_enabled, rules_bounded. */
void rules_status(struct rules *r, FILE *out);

/* Labels as config/labels and `set` take them: KEY=VALUE words separated by spaces, a key of
 * letters, digits and "._-/", a value of letters, digits and "._-" (Kubernetes' label
 * syntax). 0 or -EINVAL with why. */
int labels_check(const char *text, char *why, size_t why_size);
/* Adds "k=v" words of add to the words of *labels (a later key replaces an earlier one);
 * labels is a buffer of size bytes. -ENOSPC when they do not fit. */
int labels_merge(char *labels, size_t size, const char *add);

#endif
