#ifndef APERTURE_DAEMON_RENDER_CMD_H
#define APERTURE_DAEMON_RENDER_CMD_H

/* `aperture render FORMAT [--title T] [--hz HZ] < in.folded > out`: any folded file through
 * the views, with no daemon. Returns the process's exit status. */
int cmd_render(int argc, char **argv);

#endif
