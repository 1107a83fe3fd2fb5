/* Tests of cli/npz.c, built with the zip64 threshold lowered to 4 KiB so that the zip64
 * paths (entry offsets past the limit, a directory past it, more than 65,535 entries) run
 * on small files. Each archive is checked by numpy.load (Python's zipfile) and unzip -t:
 * array names, shapes and values come back exactly.
 * Run: build/tests/test_npz (needs /usr/bin/python3 with numpy, and unzip). */
#define NPZ_ZIP64_LIMIT 4096u
#include "../cli/npz.c"

#include <unistd.h>

#include "check.h"

/* Write n arrays a{i} = float32 [2, 3] holding i*10 + k, plus one int and one string array. */
static int write_archive(const char *path, int n) {
    char err[256];
    npz_writer *z = npz_open(path, err, sizeof err);
    if (!z) return -1;
    for (int i = 0; i < n; i++) {
        float v[6];
        for (int k = 0; k < 6; k++) v[k] = (float)(i * 10 + k);
        char name[32];
        snprintf(name, sizeof name, "a%d", i);
        int shape[2] = {2, 3};
        npz_add_f32(z, name, v, 2, shape);
    }
    int32_t ids[3] = {7, -1, 65536};
    int shape1[1] = {3};
    npz_add_i32(z, "ids", ids, 1, shape1);
    const char *strs[2] = {"\xe2\x96\x81Haus", "</s>"};
    npz_add_str(z, "pieces", strs, 2);
    if (npz_close(z, err, sizeof err)) {
        fprintf(stderr, "npz_close: %s\n", err);
        return -1;
    }
    return 0;
}

/* numpy reads every array back with the values written; prints nothing on success. */
static int numpy_check(const char *path, int n) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np, sys\n"
             "z = np.load('%s')\n"
             "assert len(z.files) == %d + 2, len(z.files)\n"
             "for i in sorted({0, %d // 2, %d - 1}):\n"
             "    a = z['a%%d' %% i]\n"
             "    assert a.dtype == np.float32 and a.shape == (2, 3), (a.dtype, a.shape)\n"
             "    assert (a.ravel() == np.arange(6) + 10 * i).all(), a\n"
             "assert z['ids'].tolist() == [7, -1, 65536]\n"
             "assert z['pieces'].tolist() == ['\\u2581Haus', '</s>']\n\"",
             path, n, n, n);
    return system(cmd);
}

static int zip64_records(const char *path) { /* 1 if the file ends with zip64 records */
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    uint8_t tail[98];
    fseek(f, -98, SEEK_END);
    size_t got = fread(tail, 1, sizeof tail, f);
    fclose(f);
    return got == 98 && tail[0] == 0x50 && tail[1] == 0x4b && tail[2] == 6 && tail[3] == 6;
}

int main(void) {
    /* 1: small, no zip64; 300: entries past 4 KiB, offsets in zip64 extras; 70000: more
     * than 65,535 entries */
    const int counts[] = {1, 300, 70000};
    for (int c = 0; c < 3; c++) {
        const int n = counts[c];
        char path[] = "/tmp/attend-test-npz-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) return 1;
        close(fd);
        CHECKF(write_archive(path, n) == 0, "%d arrays: writing failed", n);
        CHECKF(zip64_records(path) == (n > 1), "%d arrays: zip64 end records %s", n,
              n > 1 ? "missing" : "present");
        CHECKF(numpy_check(path, n) == 0, "%d arrays: numpy.load disagrees", n);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "unzip -tqq %s", path);
        CHECKF(system(cmd) == 0, "%d arrays: unzip -t failed", n);
        unlink(path);
    }
    /* a write error is reported at close, not lost */
    char err[256] = "";
    npz_writer *z = npz_open("/dev/full", err, sizeof err);
    int shape[1] = {1};
    float v = 1;
    if (z) npz_add_f32(z, "x", &v, 1, shape);
    CHECKF(z && npz_close(z, err, sizeof err) == -1 && err[0], "/dev/full: no error reported");
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
