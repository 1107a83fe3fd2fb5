/* whisper.cpp's side of tools/bench_whisper.py: one clip transcribed through whisper.cpp's
 * public API (whisper.h) with a fixed number of decoded tokens, which its command-line tool
 * cannot ask for (whisper_full_params.max_tokens has no flag there).
 *
 * Greedy, English, no timestamps (the prompt <|startoftranscript|> <|en|> <|transcribe|>
 * <|notimestamps|>, as attend's), no temperature fallback, the library's other defaults
 * (flash attention on). max_tokens M samples M + 1 tokens: the prompt's pass, then M one-token
 * passes. Prints the tokens decoded on stdout, whisper.cpp's own timings on stderr.
 *
 *   cc -O2 tools/whisper_cpp_run.c -I W/include -I W/ggml/include -L W/build/src -lwhisper \
 *      -Wl,-rpath,W/build/src -o build/whisper_cpp_run
 *   build/whisper_cpp_run MODEL.bin CLIP.f32 THREADS MAX_TOKENS     # CLIP: raw float32, 16 kHz */
#include <stdio.h>
#include <stdlib.h>

#include "whisper.h"

/* the samples of a raw float32 file, malloc'd; NULL if unreadable */
static float *read_clip(const char *path, int *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *pcm = malloc(bytes > 0 ? (size_t)bytes : 1);
    *n = (int)(bytes / (long)sizeof(float));
    if (!pcm || fread(pcm, sizeof(float), (size_t)*n, f) != (size_t)*n) {
        free(pcm);
        pcm = NULL;
    }
    fclose(f);
    return pcm;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODEL.bin CLIP.f32 THREADS MAX_TOKENS\n", argv[0]);
        return 2;
    }
    int n = 0;
    float *pcm = read_clip(argv[2], &n);
    if (!pcm) {
        fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[2]);
        return 1;
    }
    struct whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = false;
    struct whisper_context *ctx = whisper_init_from_file_with_params(argv[1], cp);
    if (!ctx) return 1;
    struct whisper_full_params wp = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    wp.n_threads = atoi(argv[3]);
    wp.max_tokens = atoi(argv[4]);
    wp.language = "en";
    wp.no_timestamps = true;
    wp.temperature_inc = 0.0f; /* no fallback */
    wp.print_progress = wp.print_realtime = wp.print_timestamps = false;
    if (whisper_full(ctx, wp, pcm, n) != 0) return 1;
    int tokens = 0;
    for (int s = 0; s < whisper_full_n_segments(ctx); s++)
        for (int t = 0; t < whisper_full_n_tokens(ctx, s); t++)
            tokens += whisper_full_get_token_id(ctx, s, t) < whisper_token_eot(ctx);
    printf("%d\n", tokens);
    whisper_print_timings(ctx);
    whisper_free(ctx);
    free(pcm);
    return 0;
}
