/* `aperture record [-F HZ] [-o DIR] [--] CMD [ARGS...]`: runs CMD under the cpu collector, with
 * no daemon, and writes its profile to DIR. */
#ifndef APERTURE_DAEMON_RECORD_CMD_H
#define APERTURE_DAEMON_RECORD_CMD_H

/* argv[0] is "record". Returns the process's exit status: CMD's, or 125/126/127. */
int record_main(int argc, char **argv);

#endif
