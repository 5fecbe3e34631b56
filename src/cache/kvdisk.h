/* kvdisk.h — the disk tier: full KV blocks in content-addressed files, shared across restarts and replicas.
 *
 * WHY: a restart forgets every cached conversation, and one process is the whole cache. Rows depend only on the
 * tokens at and before them (docs/design.md §1), so a block is named by what produced it (§5) — the namespace (the
 * model's identity, the bits' definition version, the KV type and block layout), the cache salt, and every token
 * id from position 0 to the block's end, chained block by block (kvdisk_chain) — and the same name means the same
 * bytes on any machine: a file any process may write and any may read.
 *
 * Files: DIR/kv/XY/<32 hex digits of the key>.blk — a header (magic, key, block rows, the count of ids, lengths,
 * checksums of the ids, the payload and the header, the MAC), the ids [0, (depth + 1)·B), then the block's rows as
 * the pool stores them; a recurrent state's file the same with its ids and the state (kvdisk_write_state). A read
 * checks all of it against the key and the ids the caller holds; a file that does not verify is never used:
 * it is counted (corrupt), removed, and the caller recomputes the rows.
 *
 * Authentication (a MAC key, --kv-key): checksums catch torn writes and flipped bits, not a forger — anyone who can
 * write to DIR can write a file whose checksums verify and whose rows are not what its name says. With a key, the
 * header also carries a keyed BLAKE2b (libsodium's crypto_generichash) of the header, the ids and the payload; a file
 * whose checksums verify but whose MAC does not is counted as forged, removed and recomputed. The model-identity
 * cache (kvdisk_model_identity) carries one too: a forged one would make blocks of another model read as this one's.
 * Without a key the tier trusts whatever verifies (docs/fleet.md says what that leaves open).
 *
 * Writes never block the engine: kvdisk_write copies the block into a bounded queue (past the bound it drops the
 * write, counted) and a writer thread writes it to a temporary file, fsyncs and renames it into place — a process
 * killed at any instant leaves at most a temporary file, never a partial file under a block's name. Two writers of
 * one key write the same bytes, and rename lets either win whole.
 *
 * Budget: the bytes of block files under DIR; past it, the least recently used files go (a read refreshes a file's
 * mtime), counting files other processes wrote (the writer rescans the directory when it evicts).
 *
 * Thread-safety: kvdisk_read, kvdisk_write and kvdisk_get_stats from one thread (the engine's); the writer thread
 * is the module's own.
 */
#ifndef FKV_KVDISK_H
#define FKV_KVDISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flatkv.h"

typedef struct {
    uint64_t lo, hi;
} kvdisk_key;

typedef struct {
    uint64_t hits, misses;   /* blocks read and verified; lookups that found no file */
    uint64_t corrupt;        /* files that did not verify (ignored, removed) */
    uint64_t forged;         /* with a key: files whose checksums verified and MAC did not (ignored, removed) */
    uint64_t writes, evictions; /* block files written; removed over the budget */
    uint64_t dropped, errors;   /* writes dropped (queue full) or failed (the file system refused) */
    uint64_t bytes;             /* bytes of block files under the directory, as last counted */
    uint64_t pending;           /* writes queued, not yet on disk */
} kvdisk_stats;

typedef struct kvdisk kvdisk;

#define KVDISK_MAC_KEY_BYTES 32

/* The MAC key of the secret in the file at path (--kv-key): its bytes, trailing white space aside (an editor's
 * newline must not split a fleet), at least 16 and at most 4096 of them, hashed to KVDISK_MAC_KEY_BYTES. A file
 * that others than its owner may read or write is refused: it is a secret. 0, or -1 with err (FKV_E_INPUT, or
 * FKV_E_IO when it cannot be read) naming the file. */
int kvdisk_load_key(const char *path, uint8_t key[KVDISK_MAC_KEY_BYTES], fkv_error *err);

/* The disk tier in dir (created if missing) for blocks of block_rows positions and block_bytes bytes of rows,
 * keeping at most budget bytes of block files (0: a quarter of the file system's free space); mac_key (NULL: none)
 * authenticates every file written and read. NULL with err. */
kvdisk *kvdisk_open(const char *dir, uint64_t budget, uint32_t block_rows, size_t block_bytes,
                    const uint8_t mac_key[KVDISK_MAC_KEY_BYTES], fkv_error *err);
/* Writes still queued are written first. */
void kvdisk_close(kvdisk *d);

/* The key that chains n bytes onto parent (a namespace, a salt, a block's ids): BLAKE2b-128. */
kvdisk_key kvdisk_chain(const kvdisk_key *parent, const void *bytes, size_t n);

/* The identity of the GGUF at path, mapped at map[0, size): an xxh3-128 digest of all its bytes (metadata and
 * tensor data), cached in d's directory under the file's device, inode, size and mtime so that a restart does not
 * read it all again (when the file is still there); with a MAC key, a cached identity whose MAC does not verify is
 * computed again. -1 with err when the directory cannot hold the cache. */
int kvdisk_model_identity(kvdisk *d, const char *path, const void *map, size_t size, kvdisk_key *out, fkv_error *err);

/* Read the block of key, whose ids from position 0 are ids[0, (depth + 1)·block_rows), into rows (block_bytes);
 * false when there is no such file or it does not verify. */
bool kvdisk_read(kvdisk *d, const kvdisk_key *key, uint32_t depth, const int32_t *ids, void *rows);
/* Queue the block of key (ids and rows as for kvdisk_read; both copied) for writing. */
void kvdisk_write(kvdisk *d, const kvdisk_key *key, uint32_t depth, const int32_t *ids, const void *rows);

/* Recurrent states (prefix.h) beside the blocks, verified as blocks are: the state after ids[0, n_ids), named by its
 * key and filed under its group's (the key of the chain where its block begins), so that a process that never saw it
 * can list the positions a group has states at (kvdisk_state_files) — a restart, another replica. */
void kvdisk_write_state(kvdisk *d, const kvdisk_key *group, const kvdisk_key *key, uint32_t n_ids, const int32_t *ids,
                        const void *state, size_t bytes);
bool kvdisk_read_state(kvdisk *d, const kvdisk_key *group, const kvdisk_key *key, uint32_t n_ids, const int32_t *ids,
                       void *state, size_t bytes);
typedef struct {
    uint32_t at;     /* the state after this many positions */
    kvdisk_key key;
} kvdisk_state_file;
/* Up to cap of group's state files with at in (lo, hi], in no order; how many. */
uint32_t kvdisk_state_files(kvdisk *d, const kvdisk_key *group, uint32_t lo, uint32_t hi, kvdisk_state_file *out,
                            uint32_t cap);

kvdisk_stats kvdisk_get_stats(kvdisk *d);

#endif
