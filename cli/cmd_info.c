/* attend info and attend verify. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* ---------------------------------------------------------------------------------------
 * info, verify */

/* The arguments of `attend CMD [MODEL.gguf]`: --help anywhere prints help, "--" ends the
 * options. Sets *model (NULL: the default model). Returns -1 to go on, else an exit status. */
static int parse_model_arg(const char *cmd, const char *help, int argc, char **argv, const char **model) {
    if (cli_wants_help(argc, argv)) {
        printf("usage: attend %s [MODEL.gguf]\n\n%s\n", cmd, help);
        return EXIT_OK;
    }
    *model = NULL;
    for (int i = 1, opts = 1; i < argc; i++) {
        if (opts && !strcmp(argv[i], "--")) {
            opts = 0;
        } else if (opts && cli_is_option(argv[i])) {
            return cli_unknown_option(cmd, argv[i]);
        } else if (*model) {
            fprintf(stderr, "attend %s: one model at a time (see --help)\n", cmd);
            return EXIT_USAGE;
        } else {
            *model = argv[i];
        }
    }
    return -1;
}

/* The generation settings the file records (HF's generation_config), as translate uses them. */
static void print_generation(const attend_config *c) {
    static const char *const early[] = {"false", "true", "never"};
    if (c->generation_recorded) {
        printf("decoding            %s", c->num_beams > 1 ? "beam search" : "greedy");
        if (c->num_beams > 1)
            printf(", %d beams, length penalty %g, early stopping %s", c->num_beams, c->length_penalty,
                   early[c->early_stopping]);
        printf("\n");
        if (c->min_length || c->no_repeat_ngram_size || c->repetition_penalty != 1.0f || c->renormalize_logits)
            printf("logits processors   min length %d, no repeat n-gram %d, repetition penalty %g, "
                   "renormalize %s\n", c->min_length, c->no_repeat_ngram_size, c->repetition_penalty,
                   c->renormalize_logits ? "yes" : "no");
    } else {
        printf("decoding            greedy (the file records no generation settings: re-export it to "
               "decode as its generation_config says)\n");
    }
}

int cmd_info(int argc, char **argv) {
    const char *path;
    int rc = parse_model_arg("info", "Print the model's configuration, vocabulary sizes, tensor count, dtype\n"
                             "and size.", argc, argv, &path);
    if (rc >= 0) return rc;
    char buf[4200];
    path = cli_model_path(path, buf, sizeof buf);
    attend_model *m = cli_load_model_with(path, 1);
    const attend_config *c = attend_get_config(m);
    printf("file                %s\n", path);
    printf("architecture        %s\n", c->architecture);
    printf("dtype               %s\n", c->dtype);
    printf("file size           %lld bytes (%.1f MiB)\n", c->file_bytes, c->file_bytes / 1048576.0);
    printf("tensors             %lld\n", c->tensor_count);
    printf("d_model             %d\n", c->d_model);
    printf("encoder             %d layers, %d heads, ffn %d\n", c->encoder_layers, c->encoder_heads, c->encoder_ffn_dim);
    printf("decoder             %d layers, %d heads, ffn %d\n", c->decoder_layers, c->decoder_heads, c->decoder_ffn_dim);
    if (c->relative_buckets) /* T5: heads of d_kv, relative position buckets */
        printf("attention           heads of %d (%d wide), relative positions: %d buckets up to distance %d\n",
               c->encoder_head_dim, c->encoder_heads * c->encoder_head_dim, c->relative_buckets,
               c->relative_max_distance);
    printf("activation          %s\n", c->activation);
    printf("source vocabulary   %d\n", c->vocab_size);
    printf("target vocabulary   %d\n", c->decoder_vocab_size);
    printf("shared embeddings   %s\n", c->shared_embeddings ? "yes" : "no");
    printf("tied output         %s\n", c->tied_output ? "yes" : "no");
    printf("scale embedding     %s\n", c->scale_embedding ? "yes" : "no");
    printf("max positions       %d\n", c->max_position_embeddings);
    printf("max length          %d (forced </s>: %s)\n", c->max_length, c->forced_eos ? "yes" : "no");
    if (c->model_max_length < c->max_position_embeddings)
        printf("source tokens       at most %d (the tokenizer's model_max_length)\n", c->model_max_length);
    print_generation(c);
    printf("alignment view      %s (%s)\n", c->alignment_view,
           c->alignment_view_recorded ? "recorded in the file" : "the default: the file records none; "
                                                                  "attend align --calibrate records one");
    if (c->align_head_width > 0) /* the view's item `align` (weights/FORMAT.md) */
        printf("alignment head      width %d on decoder layer %d's cross-attention input\n", c->align_head_width,
               c->align_head_layer);
    printf("special ids         eos %d, unk %d, pad %d, decoder start %d\n", c->eos_id, c->unk_id, c->pad_id,
           c->decoder_start_id);
    if (c->n_languages) { /* the codes --src-lang / --tgt-lang take */
        printf("languages           %d:", c->n_languages);
        for (int i = 0; i < c->n_languages; i++) printf(" %s", c->languages[i]);
        printf("\n");
    }
    if (c->n_tasks) { /* the names --task takes */
        printf("tasks               %d:", c->n_tasks);
        for (int i = 0; i < c->n_tasks; i++) printf(" %s", c->tasks[i]);
        printf("\n");
        for (int i = 0; i < c->n_tasks; i++) printf("  %-17s \"%s\"\n", c->tasks[i], c->task_prefixes[i]);
    }
    if (c->audio) { /* Whisper: the features it reads, the heads word timestamps read */
        printf("speech              %d mel bins, windows of %d frames (30 s)\n", c->n_mels, c->audio_frames);
        printf("alignment heads     %d:", c->n_alignment_heads);
        for (int i = 0; i < c->n_alignment_heads; i++)
            printf(" %d:%d", c->alignment_heads[2 * i], c->alignment_heads[2 * i + 1]);
        printf(" (layer:head)\n");
    }
    printf("kernels             %s\n", attend_isa());
    attend_free(m);
    return EXIT_OK;
}

int cmd_verify(int argc, char **argv) {
    const char *path;
    int rc = parse_model_arg("verify", "Check the file structure, the metadata's and every tensor's CRC-32, and\n"
                             "that every weight is finite.", argc, argv, &path);
    if (rc >= 0) return rc;
    /* attend_load checks exactly what verify promises (a failure ends here with status 3):
     * checking again would read the whole file a second time */
    attend_model *m = cli_load_model_with(path, 1);
    const attend_config *c = attend_get_config(m);
    printf("ok: %lld tensors, CRC-32 and values checked; metadata %s\n", c->tensor_count,
           c->metadata_checksum ? "CRC-32 checked" : "has no checksum (exported before it was added)");
    attend_free(m);
    return EXIT_OK;
}

