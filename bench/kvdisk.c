/* kvdisk.c — what authenticating the disk tier costs (--kv-key, src/cache/kvdisk.h): block files written and read
 * back with and without the keyed MAC, side by side in one run.
 *
 *   build/flatkv_kvdisk [DIR] [BLOCK_BYTES] [BLOCKS]
 *
 * DIR (default /tmp) gets a fresh folder per run, removed after. BLOCK_BYTES defaults to a 32-position block of an
 * 8B model's q8_0 K/V (36 layers, K and V, 1024 values each, 34 bytes per 32): 2 506 752. Writes are timed from the
 * first kvdisk_write to kvdisk_close (the writer thread's copy, temporary file, fsync, rename — the fsync dominates
 * and varies with the disk); reads are kvdisk_read of every block, the files in the page cache (just written), which
 * is where the MAC's share is largest. The two kinds alternate, three rounds each; the medians are printed, and the
 * keyed one's ratio to the other's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/kvdisk.h"
#include "harness.h"

#define ROWS 32
#define ROUNDS 3

/* One round: blocks written to a fresh folder under dir and read back; the times in ms per block. */
static int round_trip(const char *dir, const uint8_t *mac_key, size_t bytes, uint32_t blocks, uint8_t *rows,
                      uint8_t *back, double *write_ms, double *read_ms) {
    char path[512];
    snprintf(path, sizeof path, "%s/flatkv-kvdisk-bench-%d", dir, (int)getpid());
    fkv_error err = {0};
    kvdisk *d = kvdisk_open(path, (uint64_t)bytes * blocks * 4, ROWS, bytes, mac_key, &err);
    if (!d) {
        fprintf(stderr, "flatkv_kvdisk: %s\n", err.msg);
        return -1;
    }
    int32_t ids[ROWS];
    const kvdisk_key ns = {0x6b76, 0x6469736b};
    double t0 = 1e3 * harness_now();
    for (uint32_t b = 0; b < blocks; b++) {
        for (int i = 0; i < ROWS; i++) ids[i] = (int32_t)(b * ROWS + (uint32_t)i);
        const kvdisk_key key = kvdisk_chain(&ns, ids, sizeof ids);
        rows[0] = (uint8_t)b; /* each block its own bytes */
        kvdisk_write(d, &key, 0, ids, rows);
    }
    kvdisk_close(d); /* drains the queue */
    *write_ms = (1e3 * harness_now() - t0) / blocks;
    d = kvdisk_open(path, (uint64_t)bytes * blocks * 4, ROWS, bytes, mac_key, &err);
    if (!d) {
        fprintf(stderr, "flatkv_kvdisk: %s\n", err.msg);
        return -1;
    }
    uint32_t read = 0;
    t0 = 1e3 * harness_now();
    for (uint32_t b = 0; b < blocks; b++) {
        for (int i = 0; i < ROWS; i++) ids[i] = (int32_t)(b * ROWS + (uint32_t)i);
        const kvdisk_key key = kvdisk_chain(&ns, ids, sizeof ids);
        read += kvdisk_read(d, &key, 0, ids, back);
    }
    *read_ms = (1e3 * harness_now() - t0) / blocks;
    kvdisk_close(d);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", path);
    if (system(rm)) fprintf(stderr, "flatkv_kvdisk: could not remove %s\n", path);
    if (read != blocks) {
        fprintf(stderr, "flatkv_kvdisk: %u of %u blocks read back\n", read, blocks);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    const size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : 36u * 2 * 1024 / 32 * 34 * ROWS;
    const uint32_t blocks = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 64;
    if (bytes < 1 || bytes > (1u << 30) || blocks < 1 || blocks > 100000) {
        fprintf(stderr, "usage: flatkv_kvdisk [DIR] [BLOCK_BYTES 1..2^30] [BLOCKS 1..100000]\n");
        return 2;
    }
    uint8_t *rows = malloc(bytes), *back = malloc(bytes), mac_key[KVDISK_MAC_KEY_BYTES];
    if (!rows || !back) return 1;
    for (size_t i = 0; i < bytes; i++) rows[i] = (uint8_t)(i * 2654435761u >> 13);
    for (int i = 0; i < KVDISK_MAC_KEY_BYTES; i++) mac_key[i] = (uint8_t)(i * 37 + 11);
    double w[2][ROUNDS], r[2][ROUNDS];
    for (int round = 0; round < ROUNDS; round++)
        for (int keyed = 0; keyed < 2; keyed++)
            if (round_trip(dir, keyed ? mac_key : NULL, bytes, blocks, rows, back, &w[keyed][round], &r[keyed][round]))
                return 1;
    printf("%u blocks of %zu bytes in %s, median of %d rounds (ms per block)\n", blocks, bytes, dir, ROUNDS);
    double med_w[2], med_r[2];
    for (int keyed = 0; keyed < 2; keyed++) {
        harness_sort(w[keyed], ROUNDS);
        harness_sort(r[keyed], ROUNDS);
        med_w[keyed] = w[keyed][ROUNDS / 2], med_r[keyed] = r[keyed][ROUNDS / 2];
        printf("  %-9s write %7.3f ms (range %.3f-%.3f)  read %7.3f ms (range %.3f-%.3f, %.2f GB/s)\n",
               keyed ? "--kv-key" : "no key", med_w[keyed], w[keyed][0], w[keyed][ROUNDS - 1], med_r[keyed],
               r[keyed][0], r[keyed][ROUNDS - 1], bytes / med_r[keyed] / 1e6);
    }
    printf("  keyed / no key: write x%.2f, read x%.2f\n", med_w[1] / med_w[0], med_r[1] / med_r[0]);
    free(rows);
    free(back);
    return 0;
}
