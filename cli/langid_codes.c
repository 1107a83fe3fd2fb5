/* Language codes as models spell them, mapped to the ISO 639-1 codes cld2 answers with. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "langid.h"

/* ISO 639-3 (NLLB's "deu_Latn" and the like) to ISO 639-1, for the languages both know. */
static const char *const THREE_TO_TWO[][2] = {
    {"afr", "af"}, {"amh", "am"}, {"ara", "ar"}, {"arb", "ar"}, {"aze", "az"}, {"azj", "az"}, {"bel", "be"},
    {"ben", "bn"}, {"bos", "bs"}, {"bre", "br"}, {"bul", "bg"}, {"cat", "ca"}, {"ces", "cs"}, {"cmn", "zh"},
    {"cym", "cy"}, {"dan", "da"}, {"deu", "de"}, {"ell", "el"}, {"eng", "en"}, {"epo", "eo"}, {"est", "et"},
    {"eus", "eu"}, {"fao", "fo"}, {"fas", "fa"}, {"fin", "fi"}, {"fra", "fr"}, {"gle", "ga"}, {"glg", "gl"},
    {"guj", "gu"}, {"hau", "ha"}, {"heb", "he"}, {"hin", "hi"}, {"hrv", "hr"}, {"hun", "hu"}, {"hye", "hy"},
    {"ibo", "ig"}, {"ind", "id"}, {"isl", "is"}, {"ita", "it"}, {"jpn", "ja"}, {"kan", "kn"}, {"kat", "ka"},
    {"kaz", "kk"}, {"khk", "mn"}, {"khm", "km"}, {"kir", "ky"}, {"kor", "ko"}, {"lao", "lo"}, {"lat", "la"},
    {"lav", "lv"}, {"lit", "lt"}, {"ltz", "lb"}, {"lvs", "lv"}, {"mal", "ml"}, {"mar", "mr"}, {"mkd", "mk"},
    {"mlt", "mt"}, {"mon", "mn"}, {"msa", "ms"}, {"mya", "my"}, {"nep", "ne"}, {"nld", "nl"}, {"nno", "no"},
    {"nob", "no"}, {"npi", "ne"}, {"oci", "oc"}, {"pan", "pa"}, {"pes", "fa"}, {"pol", "pl"}, {"por", "pt"},
    {"ron", "ro"}, {"rus", "ru"}, {"sin", "si"}, {"slk", "sk"}, {"slv", "sl"}, {"som", "so"}, {"spa", "es"},
    {"sqi", "sq"}, {"als", "sq"}, {"srp", "sr"}, {"swa", "sw"}, {"swe", "sv"}, {"swh", "sw"}, {"tam", "ta"},
    {"tat", "tt"}, {"tel", "te"}, {"tgk", "tg"}, {"tgl", "tl"}, {"tha", "th"}, {"tur", "tr"}, {"ukr", "uk"},
    {"urd", "ur"}, {"uzb", "uz"}, {"uzn", "uz"}, {"vie", "vi"}, {"xho", "xh"}, {"yor", "yo"}, {"yue", "zh"},
    {"zho", "zh"}, {"zsm", "ms"}, {"zul", "zu"},
};

/* Old or alternative two-letter codes (cld2 answers "iw" for Hebrew) to one spelling. */
static const char *const SAME[][2] = {
    {"iw", "he"}, {"jw", "jv"}, {"in", "id"}, {"ji", "yi"}, {"nb", "no"}, {"nn", "no"}, {"fil", "tl"},
};

int langid_iso_code(const char *code, char out[8]) {
    while (*code == '_') code++; /* "__de__" */
    size_t n = 0;
    while (n < 7 && isalpha((unsigned char)code[n])) out[n] = (char)tolower((unsigned char)code[n]), n++;
    out[n] = 0;
    for (size_t i = 0; i < sizeof SAME / sizeof SAME[0]; i++)
        if (!strcmp(out, SAME[i][0])) return snprintf(out, 8, "%s", SAME[i][1]), 0;
    if (n == 2) return 0;
    for (size_t i = 0; n == 3 && i < sizeof THREE_TO_TWO / sizeof THREE_TO_TWO[0]; i++)
        if (!strcmp(out, THREE_TO_TWO[i][0])) return snprintf(out, 8, "%s", THREE_TO_TWO[i][1]), 0;
    return -1;
}
