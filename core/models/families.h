#pragma once

// The built-in model families, one line each, most specific first (detection takes the first match). Each
// names the function, defined in the family's folder core/models/NAME/, that returns its ModelFamily record
// (docs/architecture.md, "Adding a model family").
#define VAECODEC_BUILTIN_MODEL_FAMILIES(X) \
  X(wan22_family)                          \
  X(wan21_family)                          \
  X(seedvr2_family)                        \
  X(ltx2_family)

// What `bench --random` and `plan` assume when no family is named.
#define VAECODEC_DEFAULT_MODEL_FAMILY "wan2.1-vae"
