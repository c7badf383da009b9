/* repack_cache: the on-disk cache of a model's repacked weights (repack.h), so that a second load
 * maps them instead of converting again. One file per model file identity (device, inode, size,
 * mtime) and layout version, in $TRIT_CACHE_DIR, else $XDG_CACHE_HOME/trit, else $HOME/.cache/trit.
 * A file (little-endian):
 *   header [RC_HEADER_BYTES]  "TRITPACK", u32 version, u32 n_tensors, the identity (u64 dev, ino,
 *                             size, i64 mtime seconds, nanoseconds), u64 file bytes, u64 checksum
 *                             (FNV-1a of header and table with this field zero), 24 zero bytes
 *   table  [n x RC_ENTRY_BYTES] name[64] (NUL-terminated), u32 type, u32 layout (RP_C2, RP_Q7),
 *                             i64 n_in, i64 n_out, u64 offset, u64 bytes
 *   data                      each tensor at its offset (a multiple of RC_ALIGN, ascending, no
 *                             overlaps), bytes = repack_bytes(type, layout, n_in, n_out).
 * The file is external input: rc_parse checks all of it but the packed bytes (any bytes are valid
 * weights there, as in a GGUF file). */
#ifndef TRIT_REPACK_CACHE_H
#define TRIT_REPACK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

/* Bump when repack.h's layout or this format changes: older files are then rebuilt. */
#define RC_VERSION 2u
enum { RC_HEADER_BYTES = 96, RC_ENTRY_BYTES = 104, RC_NAME_BYTES = 64, RC_ALIGN = 4096 };
#define RC_MAX_TENSORS (1u << 20)

typedef struct {
    uint64_t dev, ino, size;
    int64_t mtime_s, mtime_ns;
} rc_identity;

typedef struct {
    const char *name; /* < RC_NAME_BYTES bytes */
    uint32_t type, layout;
    int64_t n_in, n_out;
    uint64_t offset, bytes;
} rc_entry;

/* The identity of the file at path (stat). */
int rc_identity_of(const char *path, rc_identity *id, trit_err *err);
/* The cache directory from the environment into buf; -1 when none is set (no HOME either). */
int rc_dir(char *buf, size_t n);
/* Makes dir and its missing parents (mode 0700, as XDG asks of cache directories). */
int rc_mkdir(const char *dir, trit_err *err);
/* The cache file for the model at model_path: dir/<model file name>-<hash of identity, version and
 * tag>.pack; tag tells apart the layouts different kernel sets pack the same file in. */
int rc_path(const char *dir, const char *model_path, const rc_identity *id, uint32_t tag, char *buf, size_t n);

/* Sets the offsets of n entries (bytes filled in) after the header and table; returns the file
 * size, 0 on overflow. */
uint64_t rc_layout(rc_entry *e, uint32_t n);
/* Writes header and table of a file of total bytes at buf (rc_layout's entries), checksummed. */
void rc_write_header(uint8_t *buf, const rc_identity *id, const rc_entry *e, uint32_t n, uint64_t total);
/* Recomputes the checksum of a header and table written at buf (n from the header). */
void rc_seal(uint8_t *buf);

/* Validates a whole file image. On success *entries (malloc'd; names point into data) holds
 * *n entries and *id the identity the file claims; on failure -1 with one line in err. */
int rc_parse(const uint8_t *data, size_t size, rc_identity *id, rc_entry **entries, uint32_t *n, trit_err *err);

#endif
