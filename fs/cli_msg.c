/*
 * The one way `tracefs` subcommands report on stderr; it decides no exit status but the
 * runtime-error default it returns.
 */
#include <stdarg.h>
#include <stdio.h>

#include "cli_i.h"

int fs_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("tracefs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}
