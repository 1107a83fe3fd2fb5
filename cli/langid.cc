// langid.h over libcld2: clean the text, ask cld2 (hinted with the candidates), keep the
// candidates' answers, and fall back to the first candidate when cld2 names none of them.
#include "langid.h"

#include <cstdio>  // before cld2's header, which uses FILE without it
#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>

#include <cstring>
#include <string>

namespace {

// Length of the valid UTF-8 sequence at s[0..n), or 0 (overlong forms, surrogates and code
// points past U+10FFFF are invalid, as cld2 would refuse them).
size_t utf8_seq(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;  // overlong
    if (c == 0xED && s[1] >= 0xA0) return 0;  // surrogates
    if (c == 0xF0 && s[1] < 0x90) return 0;  // overlong
    if (c == 0xF4 && s[1] >= 0x90) return 0;  // past U+10FFFF
    if (c == 0xC2 && s[1] < 0xA0) return 0;  // C1 controls: not text
    return len;
}

// The text cld2 sees: at most LANGID_MAX_BYTES, invalid bytes and control characters as spaces.
std::string clean(const char *text, size_t len) {
    std::string out;
    const unsigned char *s = reinterpret_cast<const unsigned char *>(text);
    if (len > LANGID_MAX_BYTES) len = LANGID_MAX_BYTES;
    out.reserve(len);
    for (size_t i = 0; i < len;) {
        const size_t k = utf8_seq(s + i, len - i);
        if (!k || (k == 1 && s[i] < 0x20) || (k == 1 && s[i] == 0x7F)) {
            out.push_back(' ');
            i += k ? k : 1;
            continue;
        }
        out.append(text + i, k);
        i += k;
    }
    return out;
}

// cld2's code for lang as ISO 639-1 ("zh-Hant" -> "zh", "iw" -> "he").
void iso_of(CLD2::Language lang, char out[8]) { langid_iso_code(CLD2::LanguageCode(lang), out); }

struct Detection {
    CLD2::Language lang[3];
    int percent[3];
    bool reliable;
};

Detection run_cld2(const std::string &text, const std::string &hint) {
    Detection d = {{CLD2::UNKNOWN_LANGUAGE, CLD2::UNKNOWN_LANGUAGE, CLD2::UNKNOWN_LANGUAGE}, {0, 0, 0}, false};
    if (text.empty()) return d;
    CLD2::CLDHints hints = {hint.empty() ? nullptr : hint.c_str(), nullptr, CLD2::UNKNOWN_ENCODING,
                            CLD2::UNKNOWN_LANGUAGE};
    double scores[3];
    int text_bytes = 0, valid = 0;
    CLD2::ExtDetectLanguageSummaryCheckUTF8(text.data(), (int)text.size(), true, &hints,
                                            CLD2::kCLDFlagBestEffort, d.lang, d.percent, scores, nullptr,
                                            &text_bytes, &d.reliable, &valid);
    return d;
}

// The candidates' ISO codes joined as cld2's content-language hint ("de,en"); none for a long
// list, where a hint favouring everything says nothing.
std::string hint_of(const char *const *among, int n_among) {
    std::string hint;
    for (int i = 0; i < n_among && n_among <= 8; i++) {
        char iso[8];
        if (langid_iso_code(among[i], iso)) continue;
        if (!hint.empty()) hint.push_back(',');
        hint += iso;
    }
    return hint;
}

// The candidate that iso stands for, or -1.
int candidate_of(const char *iso, const char *const *among, int n_among) {
    for (int i = 0; i < n_among; i++) {
        char c[8];
        langid_iso_code(among[i], c);
        if (!strcmp(c, iso)) return i;
    }
    return -1;
}

// Does cld2's answer name one of the candidates?
bool names_candidate(const Detection &d, const char *const *among, int n_among) {
    for (int k = 0; k < 3; k++) {
        char iso[8];
        iso_of(d.lang[k], iso);
        if (d.lang[k] != CLD2::UNKNOWN_LANGUAGE && d.percent[k] > 0 && candidate_of(iso, among, n_among) >= 0)
            return true;
    }
    return false;
}

}  // namespace

extern "C" int langid_detect(const char *text, size_t len, const char *const *among, int n_among,
                             langid_guess *out) {
    if (!among) n_among = 0;
    const std::string clean_text = clean(text ? text : "", text ? len : 0);
    Detection d = run_cld2(clean_text, "");
    // cld2 named none of the candidates: sure of it, the text is in none of them (the first
    // candidate, confidence 0, below); unsure (short text), ask again with the candidates as
    // a hint, and trust that answer half as much. Hinting every time would sway short texts
    // (a short English line hinted "de,en" turns German more often than unhinted).
    double trust = 1.0;
    if (n_among && !names_candidate(d, among, n_among)) {
        if (d.reliable) d.lang[0] = d.lang[1] = d.lang[2] = CLD2::UNKNOWN_LANGUAGE;
        else d = run_cld2(clean_text, hint_of(among, n_among)), trust = 0.5;
    }
    int n = 0;
    for (int k = 0; k < 3 && n < LANGID_MAX_GUESSES; k++) {
        if (d.lang[k] == CLD2::UNKNOWN_LANGUAGE || d.lang[k] == CLD2::TG_UNKNOWN_LANGUAGE || d.percent[k] <= 0)
            continue;
        char iso[8];
        iso_of(d.lang[k], iso);
        const int c = n_among ? candidate_of(iso, among, n_among) : -1;
        if (n_among && c < 0) continue;
        const char *code = c >= 0 ? among[c] : iso;
        bool seen = false;
        for (int j = 0; j < n; j++) seen = seen || !strcmp(out[j].code, code);
        if (seen) continue;
        snprintf(out[n].code, sizeof out[n].code, "%s", code);
        // an unreliable answer (short or mixed text) is worth half its share of the text
        out[n++].confidence = trust * (d.reliable ? d.percent[k] : d.percent[k] / 2.0);
    }
    if (n == 0 && n_among > 0) {  // nothing said: the first candidate, with no confidence
        snprintf(out[0].code, sizeof out[0].code, "%s", among[0]);
        out[0].confidence = 0;
        n = 1;
    }
    return n;
}
