// langid (langid.h): CLD2 behind a C interface. CLD2 reads interchange-valid UTF-8 only,
// so every text is first cleaned (invalid bytes and control characters become spaces);
// it knows ISO 639-1 codes, so a model's codes ("de_DE", "deu_Latn") are mapped to them.
#include <cstdio> // compact_lang_det.h uses FILE without including it

#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>

#include <cstring>
#include <string>

#include "langid.h"

namespace {

constexpr size_t MAX_BYTES = 64 * 1024; // past this, more text does not change the answer

// ISO 639-3 (NLLB's codes) to 639-1, for the languages CLD2 knows.
const char *const ISO3[][2] = {
    {"afr", "af"}, {"amh", "am"}, {"arb", "ar"}, {"ara", "ar"}, {"asm", "as"}, {"azj", "az"}, {"aze", "az"},
    {"bak", "ba"}, {"bel", "be"}, {"ben", "bn"}, {"bod", "bo"}, {"bos", "bs"}, {"bul", "bg"}, {"cat", "ca"},
    {"ceb", "ceb"}, {"ces", "cs"}, {"cym", "cy"}, {"dan", "da"}, {"deu", "de"}, {"ell", "el"}, {"eng", "en"},
    {"epo", "eo"}, {"est", "et"}, {"ekk", "et"}, {"eus", "eu"}, {"fao", "fo"}, {"fas", "fa"}, {"pes", "fa"},
    {"fin", "fi"}, {"fra", "fr"}, {"gla", "gd"}, {"gle", "ga"}, {"glg", "gl"}, {"guj", "gu"}, {"hat", "ht"},
    {"hau", "ha"}, {"heb", "he"}, {"hin", "hi"}, {"hrv", "hr"}, {"hun", "hu"}, {"hye", "hy"}, {"ibo", "ig"},
    {"ind", "id"}, {"isl", "is"}, {"ita", "it"}, {"jav", "jw"}, {"jpn", "ja"}, {"kan", "kn"}, {"kat", "ka"},
    {"kaz", "kk"}, {"khm", "km"}, {"kin", "rw"}, {"kir", "ky"}, {"kor", "ko"}, {"kur", "ku"}, {"lao", "lo"},
    {"lat", "la"}, {"lav", "lv"}, {"lvs", "lv"}, {"lit", "lt"}, {"ltz", "lb"}, {"mal", "ml"}, {"mar", "mr"},
    {"mkd", "mk"}, {"mlt", "mt"}, {"mon", "mn"}, {"khk", "mn"}, {"mri", "mi"}, {"msa", "ms"}, {"zsm", "ms"},
    {"mya", "my"}, {"nep", "ne"}, {"npi", "ne"}, {"nld", "nl"}, {"nno", "nn"}, {"nob", "no"}, {"nor", "no"},
    {"nya", "ny"}, {"oci", "oc"}, {"ori", "or"}, {"ory", "or"}, {"pan", "pa"}, {"pol", "pl"}, {"por", "pt"},
    {"pus", "ps"}, {"pbt", "ps"}, {"ron", "ro"}, {"rus", "ru"}, {"sin", "si"}, {"slk", "sk"}, {"slv", "sl"},
    {"smo", "sm"}, {"sna", "sn"}, {"snd", "sd"}, {"som", "so"}, {"sot", "st"}, {"spa", "es"}, {"sqi", "sq"},
    {"als", "sq"}, {"srp", "sr"}, {"sun", "su"}, {"swa", "sw"}, {"swh", "sw"}, {"swe", "sv"}, {"tam", "ta"},
    {"tat", "tt"}, {"tel", "te"}, {"tgk", "tg"}, {"tgl", "tl"}, {"tha", "th"}, {"tir", "ti"}, {"tur", "tr"},
    {"uig", "ug"}, {"ukr", "uk"}, {"urd", "ur"}, {"uzb", "uz"}, {"uzn", "uz"}, {"vie", "vi"}, {"xho", "xh"},
    {"yid", "yi"}, {"ydd", "yi"}, {"yor", "yo"}, {"zho", "zh"}, {"zul", "zu"},
};

// The length of the UTF-8 character at s (n bytes left) when it is valid, else 0.
size_t utf8_char(const unsigned char *s, size_t n) {
    const unsigned char c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    unsigned cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) cp = (cp << 6) | (s[i] & 0x3F);
    static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0; // overlong, surrogate
    return len;
}

// text as CLD2 may read it: valid UTF-8, control characters and invalid bytes as spaces.
std::string clean(const char *text, size_t len) {
    std::string out;
    const unsigned char *s = reinterpret_cast<const unsigned char *>(text);
    for (size_t i = 0; i < len && out.size() < MAX_BYTES;) {
        const size_t n = utf8_char(s + i, len - i);
        if (!n || (n == 1 && (s[i] < 0x20 || s[i] == 0x7F))) {
            out += ' ';
            i += n ? n : 1;
        } else {
            out.append(text + i, n);
            i += n;
        }
    }
    return out;
}

// CLD2's code for lang as ISO 639-1 ("zh-Hant" -> "zh"; its old codes "iw", "jw", "in", "ji"
// -> "he", "jv", "id", "yi"), so that it meets a model's code and LibreTranslate's.
void iso_of(CLD2::Language lang, char out[8]) {
    static const char *const OLD[][2] = {{"iw", "he"}, {"jw", "jv"}, {"in", "id"}, {"ji", "yi"}};
    const char *code = CLD2::LanguageCode(lang);
    snprintf(out, 8, "%.*s", (int)strcspn(code, "-"), code);
    for (const auto &e : OLD)
        if (!strcmp(out, e[0])) snprintf(out, 8, "%s", e[1]);
}

// Do two ISO 639-1 codes name one language? (Norwegian: CLD2 says "no", models "nb".)
bool same_language(const char *a, const char *b) {
    const auto norm = [](const char *c) { return !strcmp(c, "nb") ? "no" : !strcmp(c, "jw") ? "jv" : c; };
    return *a && !strcmp(norm(a), norm(b));
}

int add(langid_guess *out, int n, int max, const char *code, float confidence) {
    for (int i = 0; i < n; i++) // CLD2's Chinese and traditional Chinese are one "zh"
        if (!strcmp(out[i].code, code)) return n;
    if (n >= max) return n;
    snprintf(out[n].code, sizeof out[n].code, "%s", code);
    out[n].confidence = confidence;
    return n + 1;
}

} // namespace

void langid_iso(const char *code, char *out, size_t cap) {
    code += strspn(code, "_"); // "__de__", as some multilingual vocabularies spell it
    size_t n = strcspn(code, "_-");
    char base[8] = "";
    if (n >= 2 && n <= 3) snprintf(base, sizeof base, "%.*s", (int)n, code);
    for (char *p = base; *p; p++) *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    const char *iso = n == 2 ? base : "";
    for (const auto &e : ISO3)
        if (n == 3 && !strcmp(e[0], base)) iso = e[1];
    snprintf(out, cap, "%s", iso);
}

int langid_detect(const char *text, size_t len, const char *const *candidates, int n_candidates, langid_guess *out,
                  int max) {
    const std::string s = clean(text, len);
    /* no hints: CLD2's Content-Language hint outweighs the text itself on short texts
     * ("I am hungry" with the hint "de,en" comes back German) */
    CLD2::CLDHints hints = {nullptr, nullptr, CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
    CLD2::Language lang3[3];
    int percent3[3], text_bytes = 0, valid = 0;
    double score3[3];
    bool reliable = false;
    CLD2::ExtDetectLanguageSummaryCheckUTF8(s.data(), (int)s.size(), true, &hints, CLD2::kCLDFlagBestEffort, lang3,
                                            percent3, score3, nullptr, &text_bytes, &reliable, &valid);
    int n = 0;
    for (int k = 0; k < 3; k++) {
        if (lang3[k] == CLD2::UNKNOWN_LANGUAGE || percent3[k] <= 0) continue;
        const float confidence = (float)percent3[k] * (reliable ? 1.0f : 0.5f);
        char iso[8], want[32];
        iso_of(lang3[k], iso);
        if (!n_candidates) {
            n = add(out, n, max, iso, confidence);
            continue;
        }
        for (int i = 0; i < n_candidates; i++)
            if (langid_iso(candidates[i], want, sizeof want), same_language(want, iso)) {
                n = add(out, n, max, candidates[i], confidence);
                break;
            }
    }
    if (!n && n_candidates) n = add(out, n, max, candidates[0], 0.0f); // in none of them: say so
    return n;
}
