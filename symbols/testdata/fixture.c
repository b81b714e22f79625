// SPDX-License-Identifier: GPL-2.0
/* Built into shared libraries that are then stripped of .symtab: the static function keeps
 * no symbol at all, the exported ones stay in .dynsym. One copy also gets a separate debug
 * file through .gnu_debuglink, where the static function's symbol lives on. */

/* Makes each variant's contents, and so its build-id, differ: the cache would otherwise take
 * the copies for one file. */
__attribute__((used)) static const char variant[] = SYMFIXTURE_VARIANT;

/* The body is large enough that its address cannot fall inside any exported symbol. */
static __attribute__((noinline, used)) int hidden_fn(int x)
{
	volatile int acc = x;

	for (int i = 0; i < 10; i++)
		acc = acc * 31 + i;
	return acc;
}

__attribute__((noinline)) int symfixture_exported(int x)
{
	return hidden_fn(x) + 1;
}

void *symfixture_hidden_fn_addr(void)
{
	return (void *)hidden_fn;
}
