/* The profiles' units as fs/tree.c has them: what the Pyroscope decoders' fuzz targets need
 * of the tree, without linking the daemon it belongs to. */
#include "fs/tree.h"

const struct tree_profile tree_profiles[TARGET_PROFILE_NR] = {
	[TARGET_PROFILE_CPU] = { .unit = "samples" },
	[TARGET_PROFILE_JVM_ALLOC] = { .unit = "bytes" },
	[TARGET_PROFILE_JVM_ALLOC_OBJECTS] = { .unit = "samples" },
	[TARGET_PROFILE_JVM_MONITORS] = { .unit = "microseconds" },
	[TARGET_PROFILE_OFFCPU] = { .unit = "microseconds" },
	[TARGET_PROFILE_LOCKS] = { .unit = "microseconds" },
};
