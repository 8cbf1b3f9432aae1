/*
 * The one way `tracefs` subcommands report on stderr; it decides no exit status but the
 * defaults it returns (1 for a runtime error, 2 for a usage error).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

int fs_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("tracefs: ", stderr);
	if (cmd)
		fprintf(stderr, "%s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try 'tracefs %s%s--help')\n", cmd ? cmd : "", cmd ? " " : "");
	return 2;
}

const char *fs_strerror(int err)
{
	static _Thread_local char buf[128];
	const char *text = strerror_r(err, buf, sizeof(buf));

	if (text != buf)
		snprintf(buf, sizeof(buf), "%s", text);
	if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}
