/* C++ and Rust (legacy and v0) names made readable, with libiberty's demangler, the one
 * binutils and GDB use. Its Rust support (rust-demangle.c) handles both manglings since
 * GCC 11's libiberty; Debian 12 has the 2023 one. */
#ifndef APERTURE_SYMBOLS_DEMANGLE_H
#define APERTURE_SYMBOLS_DEMANGLE_H

#include <stddef.h>

/* Writes the demangled form of name to buf (cut with "..." if it does not fit len >= 4) and
 * returns 1, or returns 0 leaving buf alone when name is not mangled. A symbol version
 * ("@@GLIBCXX_3.4") is dropped before demangling. */
int demangle(const char *name, char *buf, size_t len);

#endif
