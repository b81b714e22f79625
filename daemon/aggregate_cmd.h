/* `aperture aggregate ...`, the fleet's aggregator, and `aperture fetch URL [PATH]`, a client
 * of its HTTP reads. argv[0] is the subcommand; each returns the process's exit status. */
#ifndef APERTURE_DAEMON_AGGREGATE_CMD_H
#define APERTURE_DAEMON_AGGREGATE_CMD_H

int aggregate_main(int argc, char **argv);
int fetch_main(int argc, char **argv);

#endif
