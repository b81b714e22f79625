/* Prometheus text exposition format (0.0.4): the pieces every metrics file shares. */
#ifndef APERTURE_VIEWS_PROM_H
#define APERTURE_VIEWS_PROM_H

#include <stdint.h>
#include <stdio.h>

/* "# HELP name help" and "# TYPE name type". */
void prom_family(FILE *out, const char *name, const char *type, const char *help);
/* name value, for a family without labels. */
void prom_value(FILE *out, const char *name, const char *type, const char *help, double v);
/* A label's value with backslash, quote and newline escaped. */
void prom_label(FILE *out, const char *v);

#endif
