// The only C++ in attend: a thin extern "C" shell around sentencepiece::SentencePieceProcessor.
#include "spm.h"

#include <sentencepiece_processor.h>

#include <cstdint>
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

// ---------------------------------------------------------------------------------------
// Checking a model's normalization tables before SentencePiece sees them. The library walks
// the precompiled character map (a Darts-clone double-array trie, then NUL-separated
// replacement strings) without bounds checks: a hostile model file could make it read
// anywhere. We walk every trie state an input could reach and check each read it would make.

// A protobuf varint at p (< end); 0 on success.
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end) return -1;
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

// Visit each length-delimited field `want` of the message [p, end); 0 if every one passed
// check and the message is well formed.
template <typename F>
static int each_field(const uint8_t *p, const uint8_t *end, uint64_t want, F check) {
    while (p < end) {
        uint64_t key, len;
        if (read_varint(&p, end, &key)) return -1;
        switch (key & 7) {
        case 0:
            if (read_varint(&p, end, &len)) return -1;
            break;
        case 1:
            if (end - p < 8) return -1;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return -1;
            p += 4;
            break;
        case 2:
            if (read_varint(&p, end, &len) || len > (uint64_t)(end - p)) return -1;
            if ((key >> 3) == want && check(p, (size_t)len)) return -1;
            p += len;
            break;
        default: return -1; // groups: not in SentencePiece's schema
        }
    }
    return 0;
}

// Darts-clone unit fields.
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xff); }
static int unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

// 0 if the precompiled map is safe to use: layout, every reachable trie read in bounds,
// every replacement index inside the NUL-terminated strings.
static int check_charsmap(const uint8_t *blob, size_t n) {
    if (n == 0) return 0; // no map: the library skips it
    if (n < 4) return -1;
    uint32_t trie_bytes;
    memcpy(&trie_bytes, blob, 4);
    if (trie_bytes < 4 || trie_bytes % 4 || trie_bytes > n - 4) return -1;
    const uint8_t *trie = blob + 4;
    const size_t units = trie_bytes / 4, strings = n - 4 - trie_bytes;
    if (strings == 0 || blob[n - 1] != 0) return -1;
    auto unit = [&](size_t i) {
        uint32_t u;
        memcpy(&u, trie + 4 * i, 4);
        return u;
    };
    std::vector<uint8_t> seen(units, 0);
    std::vector<uint32_t> todo;
    const uint32_t root = unit_offset(unit(0)); // node 0's children start here
    todo.push_back(root);
    while (!todo.empty()) {
        uint32_t base = todo.back();
        todo.pop_back();
        if ((size_t)(base | 0xff) >= units) return -1; // any next byte is looked up
        if (seen[base]) continue;
        seen[base] = 1;
        for (uint32_t c = 0; c < 256; c++) {
            uint32_t u = unit(base ^ c);
            if (unit_label(u) != c) continue; // the search stops here
            uint32_t next = (base ^ c) ^ unit_offset(u);
            if (next >= units) return -1;
            if (unit_has_leaf(u) && unit_value(unit(next)) >= strings) return -1;
            todo.push_back(next);
        }
    }
    return 0;
}

// 0 if every normalizer (field 3) and denormalizer (field 5) map in the model is safe.
static int check_model_maps(const void *bytes, size_t n) {
    const uint8_t *p = static_cast<const uint8_t *>(bytes);
    auto spec = [](const uint8_t *q, size_t len) {
        return each_field(q, q + len, 2, [](const uint8_t *m, size_t mlen) {
            return check_charsmap(m, mlen);
        });
    };
    return each_field(p, p + n, 3, spec) || each_field(p, p + n, 5, spec) ? -1 : 0;
}

extern "C" spm_model *spm_load(const void *bytes, size_t n, char *err, size_t errlen) {
    if (check_model_maps(bytes, n)) {
        set_err(err, errlen, "SentencePiece model rejected: malformed or unsafe normalization map");
        return nullptr;
    }
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
