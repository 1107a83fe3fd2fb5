// The only C++ in attend: a thin extern "C" shell around sentencepiece::SentencePieceProcessor.
#include "spm.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

struct spm_model {
    sentencepiece::SentencePieceProcessor proc;
};

// Library messages may quote model bytes: control bytes become '?' to keep errors one line.
static void set_err(char *err, size_t errlen, const std::string &msg) {
    if (!err || !errlen) return;
    snprintf(err, errlen, "%s", msg.c_str());
    for (char *p = err; *p; p++)
        if (static_cast<unsigned char>(*p) < 32 || *p == 127) *p = '?';
}

extern "C" spm_model *spm_load(const void *bytes, size_t n, char *err, size_t errlen) {
    spm_model *sp = new (std::nothrow) spm_model;
    if (!sp) {
        set_err(err, errlen, "out of memory");
        return nullptr;
    }
    try {
        auto st = sp->proc.LoadFromSerializedProto(
            absl::string_view(static_cast<const char *>(bytes), n));
        if (!st.ok()) {
            set_err(err, errlen, "SentencePiece model rejected: " + st.ToString());
            delete sp;
            return nullptr;
        }
    } catch (const std::exception &e) {
        set_err(err, errlen, std::string("SentencePiece model rejected: ") + e.what());
        delete sp;
        return nullptr;
    }
    return sp;
}

extern "C" void spm_free(spm_model *sp) { delete sp; }

extern "C" int spm_encode(const spm_model *sp, const char *text, size_t len, spm_pieces *out,
                          char *err, size_t errlen) {
    out->piece = nullptr;
    out->n = 0;
    std::vector<std::string> pieces;
    try {
        auto st = sp->proc.Encode(absl::string_view(text, len), &pieces);
        if (!st.ok()) {
            set_err(err, errlen, "SentencePiece encode failed: " + st.ToString());
            return -1;
        }
    } catch (const std::exception &e) {
        set_err(err, errlen, std::string("SentencePiece encode failed: ") + e.what());
        return -1;
    }
    out->piece = static_cast<char **>(calloc(pieces.size() + 1, sizeof(char *)));
    if (!out->piece) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < pieces.size(); i++) {
        out->piece[i] = strdup(pieces[i].c_str());
        if (!out->piece[i]) {
            out->n = static_cast<int>(i);
            spm_pieces_free(out);
            set_err(err, errlen, "out of memory");
            return -1;
        }
    }
    out->n = static_cast<int>(pieces.size());
    return 0;
}

extern "C" void spm_pieces_free(spm_pieces *p) {
    if (!p || !p->piece) return;
    for (int i = 0; i < p->n; i++) free(p->piece[i]);
    free(p->piece);
    p->piece = nullptr;
    p->n = 0;
}

extern "C" char *spm_decode(const spm_model *sp, const char *const *pieces, int n) {
    std::vector<std::string> v;
    std::string text;
    try {
        v.reserve(n);
        for (int i = 0; i < n; i++) v.emplace_back(pieces[i]);
        if (!sp->proc.Decode(v, &text).ok()) return nullptr;
    } catch (const std::exception &) {
        return nullptr;
    }
    return strdup(text.c_str());
}
