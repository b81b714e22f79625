#include "views/prom.h"

void prom_family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_value(FILE *out, const char *name, const char *type, const char *help, double v)
{
	prom_family(out, name, type, help);
	fprintf(out, "%s %.17g\n", name, v);
}

void prom_label(FILE *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', out);
		if (*v == '\n')
			fputs("\\n", out);
		else
			fputc(*v, out);
	}
}
