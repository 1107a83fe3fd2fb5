/* token_times: HF's token timestamps from the alignment heads' cross-attention (normalise,
 * median filter, head mean, DTW); see token_times.h. */
#include "token_times.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEP_DIAGONAL = 0, STEP_UP = 1, STEP_LEFT = 2 };

/* ---------------------------------------------------------------------------------------
 * Normalise and filter */

/* Column c of head h, rows [0, rows): minus its mean, over its population standard
 * deviation, as torch does it in float32 (the mean and std rounded to float first).
 * a: [heads][rows][frames] input; out: [rows][cols] of that head. */
static void normalise_head(const float *a, int rows, int frames, int cols, float *out) {
    for (int c = 0; c < cols; c++) {
        double sum = 0, sq = 0;
        for (int r = 0; r < rows; r++) sum += a[(size_t)r * frames + c];
        const double mean = sum / rows;
        for (int r = 0; r < rows; r++) {
            const double d = a[(size_t)r * frames + c] - mean;
            sq += d * d;
        }
        const float m = (float)mean, s = (float)sqrt(sq / rows);
        for (int r = 0; r < rows; r++) out[(size_t)r * cols + c] = (a[(size_t)r * frames + c] - m) / s;
    }
}

/* torch's sort order: NaN after every number. */
static int sorts_before(float a, float b) {
    return !isnan(a) && (isnan(b) || a < b);
}

/* The median of w values (width odd): the middle one after an insertion sort in place. */
static float middle(float *w, int width) {
    for (int i = 1; i < width; i++) {
        const float v = w[i];
        int j = i;
        for (; j > 0 && sorts_before(v, w[j - 1]); j--) w[j] = w[j - 1];
        w[j] = v;
    }
    return w[width / 2];
}

/* HF's _median_filter on one row x[0..n) into y: reflected edges (x[-k] = x[k],
 * x[n-1+k] = x[n-1-k]); a row of width / 2 values or fewer is copied. win: width floats. */
static void median_row(const float *x, int n, int width, float *win, float *y) {
    const int pad = width / 2;
    if (n <= pad) {
        memcpy(y, x, sizeof(float) * (size_t)n);
        return;
    }
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < width; k++) {
            int at = i - pad + k;
            at = at < 0 ? -at : at >= n ? 2 * (n - 1) - at : at;
            win[k] = x[at];
        }
        y[i] = middle(win, width);
    }
}

/* The matrix DTW runs on (before its sign flip): every head normalised and filtered, then
 * their mean. a: [heads][rows][frames]; m: [rows][cols]. -1 when out of memory. */
static int alignment_matrix(const float *a, int heads, int rows, int frames, int cols, int width, float *m) {
    float *norm = malloc(sizeof(float) * (size_t)rows * cols), *row = malloc(sizeof(float) * (size_t)cols);
    float *win = malloc(sizeof(float) * (size_t)width);
    double *sum = calloc((size_t)rows * cols, sizeof(double));
    int rc = norm && row && win && sum ? 0 : -1;
    for (int h = 0; h < heads && !rc; h++) {
        normalise_head(a + (size_t)h * rows * frames, rows, frames, cols, norm);
        for (int r = 0; r < rows; r++) {
            median_row(norm + (size_t)r * cols, cols, width, win, row);
            for (int c = 0; c < cols; c++) sum[(size_t)r * cols + c] += row[c];
        }
    }
    for (size_t i = 0; !rc && i < (size_t)rows * cols; i++) m[i] = (float)(sum[i] / heads);
    free(norm);
    free(row);
    free(win);
    free(sum);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Dynamic time warping */

/* HF's _dynamic_time_warping over cost -m [rows][cols]: first[r] gets the column (-1 before
 * any) where the path traced back from the corner first reaches row r. -1 when out of
 * memory. */
static int dtw_first_columns(const float *m, int rows, int cols, int *first) {
    const size_t w = (size_t)cols + 1;
    float *cost = malloc(sizeof(float) * ((size_t)rows + 1) * w);
    unsigned char *trace = malloc(((size_t)rows + 1) * w);
    if (!cost || !trace) {
        free(cost);
        free(trace);
        return -1;
    }
    for (size_t k = 0; k < ((size_t)rows + 1) * w; k++) cost[k] = INFINITY;
    cost[0] = 0;
    for (int j = 1; j <= cols; j++)
        for (int i = 1; i <= rows; i++) {
            const float c0 = cost[(i - 1) * w + j - 1], c1 = cost[(i - 1) * w + j], c2 = cost[i * w + j - 1];
            float c = c2;
            unsigned char t = STEP_LEFT;
            if (c0 < c1 && c0 < c2) c = c0, t = STEP_DIAGONAL;
            else if (c1 < c0 && c1 < c2) c = c1, t = STEP_UP;
            /* numpy adds the float64 cost to the float32 sum and stores float32 */
            cost[i * w + j] = (float)(-(double)m[(size_t)(i - 1) * cols + j - 1] + (double)c);
            trace[i * w + j] = t;
        }
    for (int i = rows, j = cols; i > 0 || j > 0;) {
        if (i > 0) first[i - 1] = j - 1; /* walking back: the last write is the first visit */
        const int t = i == 0 ? STEP_LEFT : j == 0 ? STEP_UP : trace[i * w + j];
        if (t == STEP_DIAGONAL) i--, j--;
        else if (t == STEP_UP) i--;
        else j--;
    }
    free(cost);
    free(trace);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Token times */

static int check_sizes(int heads, int rows, int frames, int width, double precision, char *err, size_t errlen) {
    if (heads < 1 || rows < 1 || frames < 1) {
        snprintf(err, errlen, "token times: attention of %d heads, %d rows, %d frames (each must be at least 1)",
                 heads, rows, frames);
        return -1;
    }
    if (width < 1 || width % 2 == 0) {
        snprintf(err, errlen, "token times: the median filter's width must be odd and positive, not %d", width);
        return -1;
    }
    if (!(precision > 0) || !isfinite(precision)) {
        snprintf(err, errlen, "token times: the time precision must be a positive number of seconds");
        return -1;
    }
    return 0;
}

int token_times(const float *attention, int heads, int rows, int frames, int audio_frames, int median_width,
                double precision, double *times, char *err, size_t errlen) {
    if (check_sizes(heads, rows, frames, median_width, precision, err, errlen)) return -1;
    const int cols = audio_frames > 0 && audio_frames < frames ? audio_frames : frames;
    for (int h = 0; h < heads; h++)
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                if (!isfinite(attention[((size_t)h * rows + r) * frames + c])) {
                    snprintf(err, errlen, "token times: attention of head %d, row %d, frame %d is not a finite number",
                             h, r, c);
                    return -1;
                }
    float *m = malloc(sizeof(float) * (size_t)rows * cols);
    int *first = malloc(sizeof(int) * (size_t)rows);
    int rc = m && first ? alignment_matrix(attention, heads, rows, frames, cols, median_width, m) : -1;
    if (!rc) rc = dtw_first_columns(m, rows, cols, first);
    for (int r = 0; !rc && r < rows; r++) times[r] = first[r] * precision;
    if (rc) snprintf(err, errlen, "token times: out of memory");
    free(m);
    free(first);
    return rc;
}
